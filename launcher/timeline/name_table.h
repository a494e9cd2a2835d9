// Names of operators, kernels and steps interned to small ids: a summary keeps one copy of each
// name however many events carry it, and looks a name up without copying it.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

namespace dtrain {

class NameTable {
 public:
  uint32_t Intern(std::string_view name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    names_.emplace_back(name);
    const auto id = static_cast<uint32_t>(names_.size() - 1);
    ids_.emplace(names_.back(), id);
    return id;
  }
  const std::string& operator[](uint32_t id) const { return names_[id]; }
  size_t size() const { return names_.size(); }

 private:
  std::deque<std::string> names_;  // a deque's elements stay put: ids_ holds views of them
  std::unordered_map<std::string_view, uint32_t> ids_;
};

}  // namespace dtrain
