// A stack machine over the opcodes of Lib/pickletools.py that protocols 2 to 5 write for plain
// data and instances of classes named by module; each read is bounds-checked, and the input's
// size bounds the work (no opcode makes more than one value, memo entries are shared).
#include "launcher/python_pickle.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "launcher/error.h"

namespace dtrain {
namespace {

using Value = std::shared_ptr<PickleValue>;

constexpr size_t kMaxDepth = 1000;  // values nested in one another (marks and containers)

class Reader {
 public:
  explicit Reader(std::string_view bytes) : in_(bytes) {}

  PickleValue Run() {
    for (;;) {
      const size_t at = pos_;
      const unsigned char op = Byte();
      switch (op) {
        case 0x80: {  // PROTO
          const int proto = Byte();
          if (proto < 2 || proto > 5) Fail(at, fmt::format("pickle protocol {}", proto));
          break;
        }
        case 0x95:  // FRAME: a length that only helps a streaming reader
          Take(8);
          break;
        case '.':  // STOP
          if (stack_.size() != 1 || !marks_.empty()) Fail(at, "a pickle that ends mid-value");
          return *stack_.back();
        case 'N':
          Push(Make(PickleValue::Kind::kNone));
          break;
        case 0x88:
        case 0x89: {  // NEWTRUE, NEWFALSE
          Value v = Make(PickleValue::Kind::kBool);
          v->integer = op == 0x88;
          Push(v);
          break;
        }
        case 'K':
          PushInt(Byte());
          break;
        case 'M':
          PushInt(static_cast<int64_t>(Unsigned(2)));
          break;
        case 'J':
          PushInt(static_cast<int32_t>(Unsigned(4)));
          break;
        case 0x8a: {  // LONG1: little-endian two's complement, up to 8 bytes here
          const size_t n = Byte();
          if (n > 8) Fail(at, "an integer wider than 64 bits");
          const std::string_view b = Take(n);
          uint64_t u = 0;
          for (size_t i = 0; i < n; ++i) u |= uint64_t{static_cast<unsigned char>(b[i])} << (8 * i);
          if (n > 0 && n < 8 && (static_cast<unsigned char>(b[n - 1]) & 0x80))
            u |= ~uint64_t{0} << (8 * n);  // sign-extend
          PushInt(static_cast<int64_t>(u));
          break;
        }
        case 'G': {  // BINFLOAT: big-endian IEEE 754 double
          const uint64_t u = BigEndian8();
          double d;
          std::memcpy(&d, &u, sizeof d);
          Value v = Make(PickleValue::Kind::kFloat);
          v->number = d;
          Push(v);
          break;
        }
        case 0x8c:  // SHORT_BINUNICODE
          PushText(PickleValue::Kind::kString, Take(Byte()));
          break;
        case 'X':  // BINUNICODE
          PushText(PickleValue::Kind::kString, Take(Unsigned(4)));
          break;
        case 0x8d:  // BINUNICODE8
          PushText(PickleValue::Kind::kString, Take(Unsigned(8)));
          break;
        case 'C':  // SHORT_BINBYTES
          PushText(PickleValue::Kind::kBytes, Take(Byte()));
          break;
        case 'B':  // BINBYTES
          PushText(PickleValue::Kind::kBytes, Take(Unsigned(4)));
          break;
        case 0x8e:  // BINBYTES8
          PushText(PickleValue::Kind::kBytes, Take(Unsigned(8)));
          break;
        case '}':
          Push(Make(PickleValue::Kind::kDict));
          break;
        case ']':
          Push(Make(PickleValue::Kind::kList));
          break;
        case ')':
          Push(Make(PickleValue::Kind::kTuple));
          break;
        case '(':  // MARK
          if (marks_.size() >= kMaxDepth) Fail(at, "values nested too deep");
          marks_.push_back(stack_.size());
          break;
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
          const size_t n = op - 0x84;
          Need(at, n);
          Value t = Make(PickleValue::Kind::kTuple);
          t->items.assign(stack_.end() - static_cast<long>(n), stack_.end());
          stack_.resize(stack_.size() - n);
          Nest(at, *t, t->items);
          Push(t);
          break;
        }
        case 't': {  // TUPLE: everything since the mark
          Value t = Make(PickleValue::Kind::kTuple);
          t->items = PopMark(at);
          Nest(at, *t, t->items);
          Push(t);
          break;
        }
        case 'a': {  // APPEND
          Need(at, 2);
          Value item = Pop();
          PickleValue& list = Container(at, PickleValue::Kind::kList);
          Nest(at, list, {item});
          list.items.push_back(item);
          break;
        }
        case 'e': {  // APPENDS
          std::vector<Value> items = PopMark(at);
          Need(at, 1);
          PickleValue& list = Container(at, PickleValue::Kind::kList);
          Nest(at, list, items);
          list.items.insert(list.items.end(), items.begin(), items.end());
          break;
        }
        case 's': {  // SETITEM
          Need(at, 3);
          Value value = Pop();
          Value key = Pop();
          PickleValue& dict = Container(at, PickleValue::Kind::kDict);
          Nest(at, dict, {key, value});
          dict.pairs.emplace_back(key, value);
          break;
        }
        case 'u': {  // SETITEMS
          std::vector<Value> items = PopMark(at);
          if (items.size() % 2) Fail(at, "a dict item without its value");
          Need(at, 1);
          PickleValue& dict = Container(at, PickleValue::Kind::kDict);
          Nest(at, dict, items);
          for (size_t i = 0; i < items.size(); i += 2)
            dict.pairs.emplace_back(items[i], items[i + 1]);
          break;
        }
        case 'c': {  // GLOBAL "module\nname\n"
          const std::string module = Line(at);
          const std::string name = Line(at);
          PushText(PickleValue::Kind::kObject, module + "." + name);
          classes_.insert(stack_.back().get());
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          Need(at, 2);
          Value name = Pop();
          Value module = Pop();
          if (module->kind != PickleValue::Kind::kString ||
              name->kind != PickleValue::Kind::kString)
            Fail(at, "a class named by something other than text");
          PushText(PickleValue::Kind::kObject, module->text + "." + name->text);
          classes_.insert(stack_.back().get());
          break;
        }
        case 0x81: {  // NEWOBJ: cls.__new__(cls, *args), here the class's instance by name
          Need(at, 2);
          Value args = Pop();
          Value cls = Pop();
          if (!classes_.count(cls.get()) || args->kind != PickleValue::Kind::kTuple)
            Fail(at, "an instance of something other than a class");
          Value obj = Make(PickleValue::Kind::kObject);
          obj->text = cls->text;
          Push(obj);
          break;
        }
        case 'b': {  // BUILD: the instance's __dict__
          Need(at, 2);
          Value state = Pop();
          PickleValue& obj = *stack_.back();
          if (obj.kind != PickleValue::Kind::kObject || classes_.count(&obj))
            Fail(at, "state for something other than an instance");
          if (state->kind == PickleValue::Kind::kDict) {
            Nest(at, obj, {state});
            obj.pairs.insert(obj.pairs.end(), state->pairs.begin(), state->pairs.end());
          } else if (state->kind != PickleValue::Kind::kNone) {
            Fail(at, "an instance's state that is not a dict");
          }
          break;
        }
        case 0x94:  // MEMOIZE
          Need(at, 1);
          memo_[memo_.size()] = stack_.back();
          break;
        case 'q':  // BINPUT
          Put(at, Byte());
          break;
        case 'r':  // LONG_BINPUT
          Put(at, Unsigned(4));
          break;
        case 'h':  // BINGET
          Get(at, Byte());
          break;
        case 'j':  // LONG_BINGET
          Get(at, Unsigned(4));
          break;
        case '0':  // POP
          Need(at, 1);
          stack_.pop_back();
          break;
        default:
          Fail(at, fmt::format("opcode 0x{:02x}, which dtrain does not read", op));
      }
    }
  }

 private:
  [[noreturn]] void Fail(size_t at, const std::string& what) const {
    throw Error(fmt::format("not a pickle dtrain reads: {} at byte {}", what, at));
  }
  std::string_view Take(uint64_t n) {
    if (n > in_.size() - pos_) Fail(pos_, fmt::format("{} byte(s) past the end", n));
    const std::string_view out = in_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  unsigned char Byte() { return static_cast<unsigned char>(Take(1)[0]); }
  uint64_t Unsigned(size_t n) {
    const std::string_view b = Take(n);
    uint64_t u = 0;
    for (size_t i = 0; i < n; ++i) u |= uint64_t{static_cast<unsigned char>(b[i])} << (8 * i);
    return u;
  }
  uint64_t BigEndian8() {
    const std::string_view b = Take(8);
    uint64_t u = 0;
    for (char c : b) u = (u << 8) | static_cast<unsigned char>(c);
    return u;
  }
  std::string Line(size_t at) {
    const size_t end = in_.find('\n', pos_);
    if (end == std::string_view::npos) Fail(at, "a class name without its end");
    std::string line(in_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return line;
  }
  static Value Make(PickleValue::Kind kind) {
    auto v = std::make_shared<PickleValue>();
    v->kind = kind;
    return v;
  }
  void Push(Value v) { stack_.push_back(std::move(v)); }
  void PushInt(int64_t i) {
    Value v = Make(PickleValue::Kind::kInt);
    v->integer = i;
    Push(v);
  }
  void PushText(PickleValue::Kind kind, std::string_view text) {
    Value v = Make(kind);
    v->text = std::string(text);
    Push(v);
  }
  Value Pop() {
    Value v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  // At least `n` values above the last mark.
  void Need(size_t at, size_t n) const {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + n) Fail(at, "an opcode without the values it takes");
  }
  std::vector<Value> PopMark(size_t at) {
    if (marks_.empty()) Fail(at, "no mark to end");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<Value> items(stack_.begin() + static_cast<long>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }
  PickleValue& Container(size_t at, PickleValue::Kind kind) {
    PickleValue& c = *stack_.back();
    if (c.kind != kind)
      Fail(at, kind == PickleValue::Kind::kList ? "items added to something other than a list"
                                                : "items set in something other than a dict");
    return c;
  }
  void Put(size_t at, uint64_t index) {
    Need(at, 1);
    memo_[index] = stack_.back();
  }
  // Only values that cannot change are read again: a list, dict or instance referred to twice
  // (shared, or inside itself) is not what a worker sends.
  void Get(size_t at, uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) Fail(at, fmt::format("memo {} read before it was written", index));
    const PickleValue::Kind kind = it->second->kind;
    if (kind == PickleValue::Kind::kList || kind == PickleValue::Kind::kDict ||
        (kind == PickleValue::Kind::kObject && !classes_.count(it->second.get())))
      Fail(at, "a list, dict or instance referred to twice");
    Push(it->second);
  }
  // `parent` holds `children` now: no deeper than kMaxDepth, so freeing it cannot overflow.
  void Nest(size_t at, PickleValue& parent, const std::vector<Value>& children) {
    for (const Value& child : children) parent.depth = std::max(parent.depth, child->depth + 1);
    if (parent.depth > kMaxDepth) Fail(at, "values nested too deep");
  }

  std::string_view in_;
  size_t pos_ = 0;
  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, Value> memo_;
  std::set<const PickleValue*> classes_;  // values that are a class, not an instance
};

void AppendText(std::string& out, const std::string& text) {
  out += 'X';  // BINUNICODE: the length in 4 bytes, little-endian
  const uint32_t n = static_cast<uint32_t>(text.size());
  for (int i = 0; i < 4; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  out += text;
}

}  // namespace

PickleValue ReadPickle(std::string_view bytes) {
  return Reader(bytes).Run();
}

std::string PickleObject(const std::string& module, const std::string& name,
                         const std::vector<std::pair<std::string, int64_t>>& state) {
  std::string out = "\x80\x02";
  out += 'c' + module + '\n' + name + '\n';
  out += ")\x81";  // EMPTY_TUPLE, NEWOBJ
  out += "}(";     // EMPTY_DICT, MARK
  for (const auto& [key, value] : state) {
    AppendText(out, key);
    out += '\x8a';  // LONG1: 8 bytes, little-endian two's complement
    out += '\x08';
    const uint64_t u = static_cast<uint64_t>(value);
    for (int i = 0; i < 8; ++i) out += static_cast<char>((u >> (8 * i)) & 0xff);
  }
  out += "ub.";  // SETITEMS, BUILD, STOP
  return out;
}

}  // namespace dtrain
