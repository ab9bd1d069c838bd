#include "ir/span.h"

#include <deque>
#include <mutex>
#include <unordered_map>

namespace tl {
namespace {
struct FileTable {
  std::mutex mu;
  std::deque<std::string> names{"<unknown>"};  // deque: references stay valid on growth
  std::unordered_map<std::string, uint32_t> ids;
};
FileTable& table() {
  static FileTable t;
  return t;
}
}  // namespace

uint32_t Span::intern(const std::string& file) {
  auto& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.ids.find(file);
  if (it != t.ids.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(t.names.size());
  t.names.push_back(file);
  t.ids.emplace(file, id);
  return id;
}

const std::string& Span::file_name(uint32_t id) {
  auto& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  return id < t.names.size() ? t.names[id] : t.names[0];
}

std::string Span::str() const {
  if (!defined()) return "<unknown>";
  return file_name(file_id) + ":" + std::to_string(line);
}

}  // namespace tl
