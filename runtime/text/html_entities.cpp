#include "runtime/text/html_entities.h"
#include "runtime/formats/json_text.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace dtrain::clip {
namespace {

struct NamedReference {
  const char* name;
  uint32_t code;
};

// The entities of HTML's Latin-1 and special sets that appear in web captions.
constexpr NamedReference kNamed[] = {
    {"amp", '&'},      {"lt", '<'},       {"gt", '>'},       {"quot", '"'},      {"apos", '\''},
    {"nbsp", 0xA0},    {"iexcl", 0xA1},   {"cent", 0xA2},    {"pound", 0xA3},    {"yen", 0xA5},
    {"sect", 0xA7},    {"copy", 0xA9},    {"laquo", 0xAB},   {"reg", 0xAE},      {"deg", 0xB0},
    {"plusmn", 0xB1},  {"micro", 0xB5},   {"para", 0xB6},    {"middot", 0xB7},   {"raquo", 0xBB},
    {"frac14", 0xBC},  {"frac12", 0xBD},  {"frac34", 0xBE},  {"iquest", 0xBF},   {"Agrave", 0xC0},
    {"Aacute", 0xC1},  {"Acirc", 0xC2},   {"Atilde", 0xC3},  {"Auml", 0xC4},     {"Aring", 0xC5},
    {"AElig", 0xC6},   {"Ccedil", 0xC7},  {"Egrave", 0xC8},  {"Eacute", 0xC9},   {"Ecirc", 0xCA},
    {"Euml", 0xCB},    {"Iacute", 0xCD},  {"Ntilde", 0xD1},  {"Oacute", 0xD3},   {"Ouml", 0xD6},
    {"times", 0xD7},   {"Oslash", 0xD8},  {"Uacute", 0xDA},  {"Uuml", 0xDC},     {"szlig", 0xDF},
    {"agrave", 0xE0},  {"aacute", 0xE1},  {"acirc", 0xE2},   {"atilde", 0xE3},   {"auml", 0xE4},
    {"aring", 0xE5},   {"aelig", 0xE6},   {"ccedil", 0xE7},  {"egrave", 0xE8},   {"eacute", 0xE9},
    {"ecirc", 0xEA},   {"euml", 0xEB},    {"igrave", 0xEC},  {"iacute", 0xED},   {"icirc", 0xEE},
    {"iuml", 0xEF},    {"ntilde", 0xF1},  {"ograve", 0xF2},  {"oacute", 0xF3},   {"ocirc", 0xF4},
    {"otilde", 0xF5},  {"ouml", 0xF6},    {"divide", 0xF7},  {"oslash", 0xF8},   {"ugrave", 0xF9},
    {"uacute", 0xFA},  {"ucirc", 0xFB},   {"uuml", 0xFC},    {"yuml", 0xFF},     {"ndash", 0x2013},
    {"mdash", 0x2014}, {"lsquo", 0x2018}, {"rsquo", 0x2019}, {"sbquo", 0x201A},  {"ldquo", 0x201C},
    {"rdquo", 0x201D}, {"bdquo", 0x201E}, {"bull", 0x2022},  {"hellip", 0x2026}, {"euro", 0x20AC},
    {"trade", 0x2122},
};

// Windows-1252's letters for references 0x80-0x9F, as browsers (and Python) read them.
constexpr uint32_t kWindows1252[32] = {
    0x20AC, 0x81,   0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160,
    0x2039, 0x0152, 0x8D,   0x017D, 0x8F,   0x90,   0x2018, 0x2019, 0x201C, 0x201D, 0x2022,
    0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x9D,   0x017E, 0x0178};

// What a numeric reference stands for: U+FFFD for NUL, surrogates and values past Unicode;
// nothing (0) for the control and non-characters HTML forbids; otherwise the code point.
uint32_t ReferencedCharacter(uint64_t value) {
  if (value == 0 || (value >= 0xD800 && value <= 0xDFFF) || value > 0x10FFFF) return 0xFFFD;
  if (value >= 0x80 && value <= 0x9F) return kWindows1252[value - 0x80];
  bool control = (value >= 0x1 && value <= 0x8) || value == 0xB ||
                 (value >= 0xE && value <= 0x1F) || value == 0x7F;
  bool non_character = (value >= 0xFDD0 && value <= 0xFDEF) || (value & 0xFFFE) == 0xFFFE;
  return control || non_character ? 0 : static_cast<uint32_t>(value);
}

// A numeric reference at text[at] == '#': sets the character (0: none) and the length consumed.
bool Numeric(const std::string& text, size_t at, uint32_t* code, size_t* length) {
  bool hex = at + 1 < text.size() && (text[at + 1] == 'x' || text[at + 1] == 'X');
  size_t end = at + (hex ? 2 : 1);
  uint64_t value = 0;
  bool any = false;
  for (; end < text.size(); ++end) {
    unsigned char c = static_cast<unsigned char>(text[end]);
    if (!(hex ? std::isxdigit(c) : std::isdigit(c))) break;
    int digit = std::isdigit(c) ? c - '0' : std::tolower(c) - 'a' + 10;
    value = std::min<uint64_t>(value * (hex ? 16 : 10) + digit, 0x110000);  // past Unicode
    any = true;
  }
  if (!any) return false;
  *code = ReferencedCharacter(value);
  *length = end - at + (end < text.size() && text[end] == ';' ? 1 : 0);
  return true;
}

// A named reference at text[at]: the longest known name that matches. As in HTML, only the
// Latin-1 names may go without their ';'.
bool Named(const std::string& text, size_t at, uint32_t* code, size_t* length) {
  size_t best = 0;
  for (const auto& entity : kNamed) {
    size_t n = std::strlen(entity.name);
    if (n <= best || text.compare(at, n, entity.name) != 0) continue;
    bool semicolon = at + n < text.size() && text[at + n] == ';';
    if (!semicolon && entity.code > 0xFF) continue;
    best = n;
    *code = entity.code;
    *length = n + (semicolon ? 1 : 0);
  }
  return best > 0;
}

}  // namespace

std::string UnescapeHtml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t code = 0;
    size_t length = 0;
    bool found = text[i] == '&' && i + 1 < text.size() &&
                 (text[i + 1] == '#' ? Numeric(text, i + 1, &code, &length)
                                     : Named(text, i + 1, &code, &length));
    if (!found) {
      out += text[i++];
      continue;
    }
    if (code != 0) AppendUtf8(out, code);
    i += 1 + length;
  }
  return out;
}

}  // namespace dtrain::clip
