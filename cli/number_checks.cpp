#include "cli/number_checks.h"

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dtrain {

CLI::Validator WholeNumberAtLeast(long long minimum) {
  return CLI::Validator(
      [minimum](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long value = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || errno == ERANGE || value < minimum || value > 1 << 30) {
          return fmt::format("expected a whole number of at least {}, got '{}'", minimum, text);
        }
        return "";
      },
      fmt::format("INT>={}", minimum));
}

CLI::Validator SecondsAtLeast(double minimum) {
  return CLI::Validator(
      [minimum](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !(value >= minimum) || value > 1e9) {
          return fmt::format("expected seconds (a number of at least {}), got '{}'", minimum, text);
        }
        return "";
      },
      "SECONDS");
}

CLI::Validator FactorAboveOneOrZero() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !(value == 0 || (value > 1 && value <= 1000))) {
          return fmt::format("expected 0 (off) or a factor above 1 such as 1.5, got '{}'", text);
        }
        return "";
      },
      "FACTOR");
}

CLI::Validator PortNumber() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const long value = std::strtol(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || value < 1 || value > 65535) {
          return fmt::format("expected a TCP port from 1 to 65535, got '{}'", text);
        }
        return "";
      },
      "PORT");
}

CLI::Validator CountOrOneOf(long long minimum, std::vector<std::string> words) {
  const CLI::Validator number = WholeNumberAtLeast(minimum);
  return CLI::Validator(
      [number, words, minimum](std::string& text) -> std::string {
        for (const std::string& word : words) {
          if (text == word) return "";
        }
        std::string copy = text;
        if (number(copy).empty()) return "";
        std::string choices;
        for (size_t i = 0; i < words.size(); ++i)
          choices += (i == 0 ? ", or " : i + 1 == words.size() ? " or " : ", ") + words[i];
        return fmt::format("expected a whole number of at least {}{}, got '{}'", minimum, choices,
                           text);
      },
      "");
}

CLI::Validator ValuesOffered(const std::vector<std::string>& words) {
  return CLI::Validator([](std::string&) { return std::string(); },
                        fmt::format("{{{}}}", fmt::join(words, ",")));
}

}  // namespace dtrain
