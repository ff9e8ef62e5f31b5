#include "model/unpickler.hpp"

#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hpctrain::model {
namespace {

struct Value;
using ValuePtr = std::shared_ptr<Value>;

// A pickled object; containers are shared so that memo references alias as in Python.
struct Value {
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kTuple, kList, kDict, kGlobal, kTensor };
  Kind kind = Kind::kNone;
  int64_t integer = 0;  // also bool
  double real = 0;
  std::string text;             // a string, or a global as "module.name"
  std::vector<ValuePtr> items;  // tuple and list elements; a dict's keys and values, alternating
  torch::Tensor tensor;         // a tensor, or a storage as a 1-D tensor
  bool is_storage = false;

  static ValuePtr make(Kind kind) {
    auto value = std::make_shared<Value>();
    value->kind = kind;
    return value;
  }
};

const char* kind_name(const Value& value) {
  switch (value.kind) {
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "string";
    case Value::Kind::kTuple:
      return "tuple";
    case Value::Kind::kList:
      return "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kGlobal:
      return "class or function";
    case Value::Kind::kTensor:
      return value.is_storage ? "storage" : "tensor";
  }
  return "?";
}

[[noreturn]] void fail(const std::string& message) { throw std::runtime_error(message); }

// The storage classes torch.save names in a persistent id (torch.FloatStorage, ...).
std::optional<torch::ScalarType> storage_dtype(const std::string& global) {
  static const std::array<std::pair<const char*, torch::ScalarType>, 12> kStorages = {{
      {"torch.FloatStorage", torch::kFloat},
      {"torch.DoubleStorage", torch::kDouble},
      {"torch.HalfStorage", torch::kHalf},
      {"torch.BFloat16Storage", torch::kBFloat16},
      {"torch.LongStorage", torch::kLong},
      {"torch.IntStorage", torch::kInt},
      {"torch.ShortStorage", torch::kShort},
      {"torch.CharStorage", torch::kChar},
      {"torch.ByteStorage", torch::kByte},
      {"torch.BoolStorage", torch::kBool},
      {"torch.UntypedStorage", torch::kByte},
      {"torch.ComplexFloatStorage", torch::kComplexFloat},
  }};
  for (const auto& [name, dtype] : kStorages) {
    if (global == name) return dtype;
  }
  return std::nullopt;
}

class Unpickler {
 public:
  Unpickler(std::string_view data, const StorageLoader& load_storage)
      : data_(data), load_storage_(load_storage) {}

  ValuePtr run() {
    while (true) {
      const size_t at = pos_;
      const uint8_t op = byte();
      if (op == '.') return stop();
      if (!(framing(op) || push_scalar(op) || memo_op(op) || build_container(op) ||
            object_op(op))) {
        unsupported(op, at);
      }
    }
  }

 private:
  // Each opcode group below returns false for an opcode not its own.

  // PROTO, FRAME and MARK: structure, no values.
  bool framing(uint8_t op) {
    switch (op) {
      case 0x80:  // PROTO
        if (byte() > 5) fail("pickle protocol newer than 5");
        break;
      case 0x95:  // FRAME: a length prefix only
        take(8);
        break;
      case '(':  // MARK
        marks_.push_back(stack_.size());
        break;
      default:
        return false;
    }
    return true;
  }

  // None, bools, ints, floats and strings.
  bool push_scalar(uint8_t op) {
    switch (op) {
      case 'N':
        push(Value::make(Value::Kind::kNone));
        break;
      case 0x88:  // NEWTRUE
      case 0x89:  // NEWFALSE
        push(integer(Value::Kind::kBool, op == 0x88));
        break;
      case 'K':  // BININT1
        push(integer(Value::Kind::kInt, byte()));
        break;
      case 'M':  // BININT2
        push(integer(Value::Kind::kInt, static_cast<int64_t>(little_endian(2))));
        break;
      case 'J':  // BININT
        push(integer(Value::Kind::kInt, static_cast<int32_t>(little_endian(4))));
        break;
      case 0x8a:  // LONG1: little-endian two's complement of n bytes
        push(integer(Value::Kind::kInt, long1()));
        break;
      case 'G':  // BINFLOAT, big-endian
        push(real());
        break;
      case 'X':  // BINUNICODE
        push(string(little_endian(4)));
        break;
      case 0x8c:  // SHORT_BINUNICODE
        push(string(byte()));
        break;
      case 0x8d:  // BINUNICODE8
        push(string(little_endian(8)));
        break;
      default:
        return false;
    }
    return true;
  }

  // The memo: PUT stores the top of the stack, GET pushes it again (an alias, not a copy).
  bool memo_op(uint8_t op) {
    switch (op) {
      case 'q':  // BINPUT
        memo_[byte()] = top();
        break;
      case 'r':  // LONG_BINPUT
        memo_[little_endian(4)] = top();
        break;
      case 0x94:  // MEMOIZE
        memo_[memo_.size()] = top();
        break;
      case 'h':  // BINGET
        push(memo(byte()));
        break;
      case 'j':  // LONG_BINGET
        push(memo(little_endian(4)));
        break;
      default:
        return false;
    }
    return true;
  }

  // Tuples, lists and dicts: made empty, then filled.
  bool build_container(uint8_t op) {
    switch (op) {
      case ')':  // EMPTY_TUPLE
        push(Value::make(Value::Kind::kTuple));
        break;
      case '}':  // EMPTY_DICT
        push(Value::make(Value::Kind::kDict));
        break;
      case ']':  // EMPTY_LIST
        push(Value::make(Value::Kind::kList));
        break;
      case 't':  // TUPLE
        push(tuple(pop_to_mark()));
        break;
      case 0x85:    // TUPLE1
      case 0x86:    // TUPLE2
      case 0x87: {  // TUPLE3
        std::vector<ValuePtr> items(op - 0x84);
        for (auto it = items.rbegin(); it != items.rend(); ++it) *it = pop();
        push(tuple(std::move(items)));
        break;
      }
      case 'a': {  // APPEND
        ValuePtr item = pop();
        container(Value::Kind::kList).items.push_back(std::move(item));
        break;
      }
      case 'e': {  // APPENDS
        std::vector<ValuePtr> items = pop_to_mark();
        auto& list = container(Value::Kind::kList).items;
        list.insert(list.end(), items.begin(), items.end());
        break;
      }
      case 's': {  // SETITEM
        ValuePtr value = pop(), key = pop();
        auto& dict = container(Value::Kind::kDict).items;
        dict.push_back(std::move(key));
        dict.push_back(std::move(value));
        break;
      }
      case 'u': {  // SETITEMS
        std::vector<ValuePtr> items = pop_to_mark();
        if (items.size() % 2 != 0) fail("malformed pickle: SETITEMS with an odd count");
        auto& dict = container(Value::Kind::kDict).items;
        dict.insert(dict.end(), items.begin(), items.end());
        break;
      }
      case 'b':  // BUILD: an OrderedDict's attributes (a state dict's _metadata); not needed
        pop();
        container(Value::Kind::kDict);
        break;
      default:
        return false;
    }
    return true;
  }

  // Globals, calls of them and storage references: where tensors come from.
  bool object_op(uint8_t op) {
    switch (op) {
      case 'c': {  // GLOBAL "module\nname\n"
        std::string module = line();
        push(global(module + "." + line()));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        const ValuePtr name = pop(), module = pop();
        if (name->kind != Value::Kind::kString || module->kind != Value::Kind::kString) {
          fail("malformed pickle: STACK_GLOBAL of non-strings");
        }
        push(global(module->text + "." + name->text));
        break;
      }
      case 'R': {  // REDUCE
        const ValuePtr args = pop(), callable = pop();
        push(call(*callable, *args));
        break;
      }
      case 'Q':  // BINPERSID
        push(persistent_load(*pop()));
        break;
      default:
        return false;
    }
    return true;
  }

  // STOP: the one object left is the result.
  ValuePtr stop() {
    if (stack_.size() != 1)
      fail("malformed pickle: stack holds " + std::to_string(stack_.size()) + " objects at STOP");
    return stack_.back();
  }

  [[noreturn]] static void unsupported(uint8_t op, size_t at) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", op);
    fail(std::string("unsupported pickle opcode ") + hex + " at byte " + std::to_string(at) +
         " (only dicts of tensors are read)");
  }

  std::string_view take(size_t n) {
    if (n > data_.size() - pos_) fail("truncated pickle (data.pkl ends early)");
    const std::string_view out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  uint8_t byte() { return static_cast<uint8_t>(take(1)[0]); }
  uint64_t little_endian(size_t n) {
    const std::string_view bytes = take(n);
    uint64_t out = 0;
    for (size_t i = 0; i < n; ++i) out |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
    return out;
  }
  int64_t long1() {
    const size_t n = byte();
    if (n > 8) fail("integer wider than 64 bits in pickle");
    if (n == 0) return 0;
    uint64_t bits = little_endian(n);
    if (n < 8 && (bits >> (8 * n - 1)) != 0) bits |= ~uint64_t{0} << (8 * n);  // sign-extend
    int64_t out;
    std::memcpy(&out, &bits, sizeof out);
    return out;
  }
  std::string line() {
    const size_t end = data_.find('\n', pos_);
    if (end == std::string_view::npos) fail("truncated pickle (data.pkl ends early)");
    std::string out(data_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }

  static ValuePtr integer(Value::Kind kind, int64_t v) {
    ValuePtr out = Value::make(kind);
    out->integer = v;
    return out;
  }
  ValuePtr real() {
    uint64_t bits = 0;
    for (const char c : take(8)) bits = (bits << 8) | static_cast<uint8_t>(c);
    ValuePtr out = Value::make(Value::Kind::kFloat);
    std::memcpy(&out->real, &bits, sizeof bits);
    return out;
  }
  ValuePtr string(uint64_t n) {
    ValuePtr out = Value::make(Value::Kind::kString);
    out->text = std::string(take(n));
    return out;
  }
  static ValuePtr global(std::string name) {
    ValuePtr out = Value::make(Value::Kind::kGlobal);
    out->text = std::move(name);
    return out;
  }
  static ValuePtr tuple(std::vector<ValuePtr> items) {
    ValuePtr out = Value::make(Value::Kind::kTuple);
    out->items = std::move(items);
    return out;
  }

  void push(ValuePtr value) { stack_.push_back(std::move(value)); }
  ValuePtr pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back()))
      fail("malformed pickle: stack underflow");
    ValuePtr out = std::move(stack_.back());
    stack_.pop_back();
    return out;
  }
  const ValuePtr& top() {
    if (stack_.empty()) fail("malformed pickle: stack underflow");
    return stack_.back();
  }
  std::vector<ValuePtr> pop_to_mark() {
    if (marks_.empty()) fail("malformed pickle: no MARK");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<ValuePtr> out(
        std::make_move_iterator(stack_.begin() + static_cast<ptrdiff_t>(mark)),
        std::make_move_iterator(stack_.end()));
    stack_.resize(mark);
    return out;
  }
  Value& container(Value::Kind kind) {
    Value& target = *top();
    if (target.kind != kind) {
      fail(std::string("malformed pickle: expected a ") +
           (kind == Value::Kind::kDict ? "dict" : "list") + ", found a " + kind_name(target));
    }
    return target;
  }
  ValuePtr memo(uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail("malformed pickle: memo entry " + std::to_string(index) + " unset");
    return it->second;
  }

  static int64_t as_int(const Value& v, const char* what) {
    if (v.kind != Value::Kind::kInt)
      fail(std::string(what) + " is a " + kind_name(v) + ", not an int");
    return v.integer;
  }
  static std::vector<int64_t> as_ints(const Value& v, const char* what) {
    if (v.kind != Value::Kind::kTuple && v.kind != Value::Kind::kList) {
      fail(std::string(what) + " is a " + kind_name(v) + ", not a tuple");
    }
    std::vector<int64_t> out;
    for (const auto& item : v.items) {
      out.push_back(as_int(*item, what));
      if (out.back() < 0) fail(std::string(what) + " has a negative entry");
    }
    return out;
  }

  // The callables a state dict uses; anything else is refused.
  ValuePtr call(const Value& callable, const Value& args) {
    if (callable.kind != Value::Kind::kGlobal || args.kind != Value::Kind::kTuple) {
      fail("malformed pickle: REDUCE of a " + std::string(kind_name(callable)));
    }
    const std::string& name = callable.text;
    const auto& a = args.items;
    if (name == "collections.OrderedDict" && a.empty()) return Value::make(Value::Kind::kDict);
    if (name == "torch._utils._rebuild_tensor_v2" && (a.size() == 6 || a.size() == 7)) {
      return rebuild_tensor(*a[0], as_int(*a[1], "storage offset"), as_ints(*a[2], "size"),
                            as_ints(*a[3], "stride"));
    }
    // A tensor saved as a Parameter (state_dict(keep_vars=True)): the data is what counts.
    if ((name == "torch._utils._rebuild_parameter" && a.size() == 3) ||
        (name == "torch._utils._rebuild_parameter_with_state" && a.size() == 4)) {
      if (a[0]->kind != Value::Kind::kTensor || a[0]->is_storage)
        fail("parameter without a tensor");
      return a[0];
    }
    // libtorch's torch::pickle_save tags containers with their TorchScript type.
    if (name == "torch.jit._pickle.restore_type_tag" && a.size() == 2) return a[0];
    fail("the file needs " + name + ", which a state dict does not use (refused, as by " +
         "torch.load(weights_only=True))");
  }

  ValuePtr rebuild_tensor(const Value& storage, int64_t offset, const std::vector<int64_t>& size,
                          const std::vector<int64_t>& stride) {
    if (storage.kind != Value::Kind::kTensor || !storage.is_storage) {
      fail("_rebuild_tensor_v2 of a " + std::string(kind_name(storage)) + ", not a storage");
    }
    if (size.size() != stride.size()) fail("tensor size and stride differ in length");
    // The last element the view touches must lie inside the storage.
    int64_t extent = offset;
    bool empty = false;
    for (size_t d = 0; d < size.size(); ++d) {
      if (size[d] == 0) empty = true;
      extent += (size[d] - 1) * stride[d];
    }
    if (!empty && (offset < 0 || extent >= storage.tensor.numel())) {
      fail("a tensor reaches past the end of its storage (" +
           std::to_string(storage.tensor.numel()) + " elements)");
    }
    ValuePtr out = Value::make(Value::Kind::kTensor);
    out->tensor = storage.tensor.as_strided(size, stride, empty ? 0 : offset);
    return out;
  }

  // ('storage', torch.FloatStorage, key, location, numel): the zip record data/<key>.
  ValuePtr persistent_load(const Value& pid) {
    const auto& a = pid.items;
    if (pid.kind != Value::Kind::kTuple || a.size() != 5 || a[0]->kind != Value::Kind::kString ||
        a[0]->text != "storage" || a[1]->kind != Value::Kind::kGlobal ||
        a[2]->kind != Value::Kind::kString) {
      fail("unsupported persistent id (not a torch.save storage reference)");
    }
    const auto dtype = storage_dtype(a[1]->text);
    if (!dtype) fail("unsupported storage type " + a[1]->text);
    const int64_t numel = as_int(*a[4], "storage size");
    auto [it, fresh] = storages_.try_emplace(a[2]->text);
    if (fresh) {
      it->second = Value::make(Value::Kind::kTensor);
      it->second->is_storage = true;
      it->second->tensor = load_storage_(a[2]->text, *dtype, numel);
    }
    return it->second;
  }

  std::string_view data_;
  const StorageLoader& load_storage_;
  size_t pos_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ValuePtr> memo_;
  std::unordered_map<std::string, ValuePtr> storages_;  // one tensor per storage key
};

}  // namespace

StateDict unpickle_state_dict(std::string_view pickle, const StorageLoader& load_storage) {
  const ValuePtr root = Unpickler(pickle, load_storage).run();
  if (root->kind != Value::Kind::kDict) {
    fail(std::string("not a state dict: the file holds an object of type ") + kind_name(*root) +
         ", not a dict of name -> tensor");
  }
  StateDict out;
  const auto& items = root->items;
  for (size_t i = 0; i < items.size(); i += 2) {
    const Value& key = *items[i];
    const Value& value = *items[i + 1];
    if (key.kind != Value::Kind::kString) {
      fail(std::string("not a state dict: a key is of type ") + kind_name(key) + ", not a name");
    }
    if (value.kind != Value::Kind::kTensor || value.is_storage) {
      // A training checkpoint ({"model": ..., "epoch": ...}) is the usual case.
      fail("not a state dict: entry '" + key.text + "' is of type " + kind_name(value) +
           ", not a tensor (save model.state_dict() itself)");
    }
    if (out.contains(key.text)) fail("the name '" + key.text + "' appears twice");
    out.insert(key.text, value.tensor);
  }
  return out;
}

}  // namespace hpctrain::model
