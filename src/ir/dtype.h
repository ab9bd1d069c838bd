// Scalar data types of the IR: a type code, a bit width and a lane count.
#pragma once
#include <cstdint>
#include <string>

namespace tl {

enum class TypeCode : uint8_t {
  Int,
  UInt,
  Float,
  BFloat,
  Float8E4M3,
  Float8E5M2,
  Float4E2M1,
  Bool,
  Handle,  // opaque pointer (buffer data)
  Void,
};

struct DataType {
  TypeCode code = TypeCode::Void;
  uint8_t bits = 0;
  uint16_t lanes = 1;

  constexpr DataType() = default;
  constexpr DataType(TypeCode c, int b, int l = 1)
      : code(c), bits(static_cast<uint8_t>(b)), lanes(static_cast<uint16_t>(l)) {}

  static constexpr DataType Int(int bits) { return {TypeCode::Int, bits}; }
  static constexpr DataType UInt(int bits) { return {TypeCode::UInt, bits}; }
  static constexpr DataType Float(int bits) { return {TypeCode::Float, bits}; }
  static constexpr DataType BFloat16() { return {TypeCode::BFloat, 16}; }
  static constexpr DataType Bool() { return {TypeCode::Bool, 1}; }
  static constexpr DataType Handle() { return {TypeCode::Handle, 64}; }
  static constexpr DataType Void() { return {TypeCode::Void, 0}; }

  bool is_int() const { return code == TypeCode::Int; }
  bool is_uint() const { return code == TypeCode::UInt; }
  bool is_integer() const { return is_int() || is_uint(); }  // excludes bool
  bool is_bool() const { return code == TypeCode::Bool; }
  // Every floating kind, including the 16-bit and 8-bit storage formats.
  bool is_float() const {
    return code == TypeCode::Float || code == TypeCode::BFloat || code == TypeCode::Float8E4M3 ||
           code == TypeCode::Float8E5M2 || code == TypeCode::Float4E2M1;
  }
  bool is_handle() const { return code == TypeCode::Handle; }
  bool is_void() const { return code == TypeCode::Void; }
  // Sub-byte types exist only as storage; arithmetic on them is rejected.
  bool is_sub_byte() const { return bits < 8 && !is_bool(); }
  // Bytes one element occupies in memory (bool takes a byte).
  int bytes() const { return is_bool() ? 1 : (bits * lanes + 7) / 8; }

  bool operator==(const DataType& o) const {
    return code == o.code && bits == o.bits && lanes == o.lanes;
  }
  bool operator!=(const DataType& o) const { return !(*this == o); }

  // Canonical name as the DSL spells it: "float16", "bfloat16", "int32", "bool", ...
  std::string str() const;
  // Parses a DSL dtype name (aliases such as "float", "half", "float8_e4m3fn" accepted).
  // Throws std::invalid_argument for an unknown name.
  static DataType parse(const std::string& name);
};

}  // namespace tl
