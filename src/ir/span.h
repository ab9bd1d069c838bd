// Source locations: every IR node remembers the user's file:line it came from.
#pragma once
#include <cstdint>
#include <string>

namespace tl {

struct Span {
  uint32_t file_id = 0;  // index into the interned file table; 0 = unknown
  int32_t line = 0;
  int32_t col = 0;

  bool defined() const { return file_id != 0 && line > 0; }
  // "file.py:12" or "<unknown>".
  std::string str() const;
  // Interns a file name and returns its id (never 0).
  static uint32_t intern(const std::string& file);
  static const std::string& file_name(uint32_t id);
};

}  // namespace tl
