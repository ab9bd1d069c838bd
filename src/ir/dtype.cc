#include "ir/dtype.h"

#include <stdexcept>
#include <unordered_map>

namespace tl {

std::string DataType::str() const {
  std::string base;
  switch (code) {
    case TypeCode::Int: base = "int" + std::to_string(bits); break;
    case TypeCode::UInt: base = "uint" + std::to_string(bits); break;
    case TypeCode::Float: base = "float" + std::to_string(bits); break;
    case TypeCode::BFloat: base = "bfloat16"; break;
    case TypeCode::Float8E4M3: base = "float8_e4m3"; break;
    case TypeCode::Float8E5M2: base = "float8_e5m2"; break;
    case TypeCode::Float4E2M1: base = "float4_e2m1"; break;
    case TypeCode::Bool: base = "bool"; break;
    case TypeCode::Handle: base = "handle"; break;
    case TypeCode::Void: base = "void"; break;
  }
  if (lanes != 1) base += "x" + std::to_string(lanes);
  return base;
}

DataType DataType::parse(const std::string& name) {
  static const std::unordered_map<std::string, DataType> table = {
      {"bool", Bool()},
      {"int8", Int(8)},
      {"int16", Int(16)},
      {"int32", Int(32)},
      {"int64", Int(64)},
      {"int", Int(32)},
      {"uint8", UInt(8)},
      {"uint16", UInt(16)},
      {"uint32", UInt(32)},
      {"uint64", UInt(64)},
      {"float16", Float(16)},
      {"half", Float(16)},
      {"float32", Float(32)},
      {"float", Float(32)},
      {"float64", Float(64)},
      {"double", Float(64)},
      {"bfloat16", BFloat16()},
      {"float8_e4m3", DataType(TypeCode::Float8E4M3, 8)},
      {"float8_e4m3fn", DataType(TypeCode::Float8E4M3, 8)},
      {"e4m3_float8", DataType(TypeCode::Float8E4M3, 8)},
      {"float8_e5m2", DataType(TypeCode::Float8E5M2, 8)},
      {"e5m2_float8", DataType(TypeCode::Float8E5M2, 8)},
      {"int4", Int(4)},
      {"uint4", UInt(4)},
      {"float4_e2m1", DataType(TypeCode::Float4E2M1, 4)},
      {"float4_e2m1fn", DataType(TypeCode::Float4E2M1, 4)},
      {"handle", Handle()},
      {"void", Void()},
  };
  auto it = table.find(name);
  if (it == table.end()) throw std::invalid_argument("unknown dtype '" + name + "'");
  return it->second;
}

}  // namespace tl
