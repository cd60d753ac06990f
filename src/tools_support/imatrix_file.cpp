#include "tools_support/imatrix_file.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>

#include "io/gguf.h"
#include "io/gguf_writer.h"

namespace vela {
namespace {

constexpr std::string_view kSum2Suffix = ".in_sum2";
constexpr std::string_view kCountsSuffix = ".counts";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The first value of `values` that is NaN, infinite or negative, as a phrase; empty if none.
std::string bad_value(std::span<const float> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) return "NaN at index " + std::to_string(i);
    if (std::isinf(values[i])) return "infinity at index " + std::to_string(i);
    if (values[i] < 0.0f) return "negative value at index " + std::to_string(i);
  }
  return {};
}

std::vector<float> tensor_floats(const GgufTensorInfo& t) {
  std::vector<float> v(size_t(t.n_elements()));
  std::memcpy(v.data(), t.data, v.size() * sizeof(float));
  return v;
}

// One entry from its NAME.in_sum2 and NAME.counts tensors.
Result<ImatrixEntry> gguf_entry(const std::string& name, const GgufTensorInfo* sum2,
                                const GgufTensorInfo* counts) {
  if (sum2 == nullptr) return make_error("'" + name + ".counts' has no matching '.in_sum2'");
  if (counts == nullptr) return make_error("'" + name + ".in_sum2' has no matching '.counts'");
  for (const GgufTensorInfo* t : {sum2, counts})
    if (t->ggml_type() != GgmlType::F32)
      return make_error("tensor '" + std::string(t->name) + "' is " + ggml_type_name(t->type) +
                        ", expected F32");
  ImatrixEntry e;
  e.n_cols = sum2->ne[0];
  if (sum2->n_dims > 2 || sum2->ne[2] != 1 || sum2->ne[3] != 1 || e.n_cols <= 0 ||
      sum2->ne[1] <= 0 || sum2->ne[1] > INT32_MAX)
    return make_error("'" + name + ".in_sum2' must be [n_cols] or [n_cols, n_mat]");
  e.n_mat = int32_t(sum2->ne[1]);
  const int64_t n_counts = counts->n_elements();
  if (n_counts != 1 && n_counts != e.n_mat)
    return make_error("'" + name + ".counts' has " + std::to_string(n_counts) + " values for " +
                      std::to_string(e.n_mat) + " matrices of '.in_sum2'");
  e.sum2 = tensor_floats(*sum2);
  if (const std::string bad = bad_value(e.sum2); !bad.empty())
    return make_error("'" + name + ".in_sum2' has " + bad);
  const std::vector<float> c = tensor_floats(*counts);
  if (const std::string bad = bad_value(c); !bad.empty())
    return make_error("'" + name + ".counts' has " + bad);
  bool any = false;
  for (float v : c) {
    if (v != std::floor(v) || v > 1e15f)  // counts are whole and far below 2^63
      return make_error("'" + name + ".counts' has an impossible count: " + std::to_string(v));
    e.counts.push_back(int64_t(v));
    any |= v > 0.0f;
  }
  if (!any) return make_error("'" + name + ".counts' are 0: the entry has no data");
  for (int32_t m = 0; m < e.n_mat; ++m) {
    if (e.count(m) > 0) continue;
    for (int64_t i = 0; i < e.n_cols; ++i)
      if (e.sum2[size_t(m * e.n_cols + i)] != 0.0f)
        return make_error("'" + name + "' matrix " + std::to_string(m) +
                          " has sums but a count of 0");
  }
  e.update_importance();
  return e;
}

Result<ImportanceMatrix> read_gguf(const std::string& path) {
  auto file = GgufFile::open(path);
  if (!file) return file.error();
  const GgufFile& g = *file;
  ImportanceMatrix m;
  auto type = g.get_string("general.type");
  if (!type) return type.error();
  if (*type && **type != "imatrix")
    return make_error("general.type is '" + std::string(**type) + "', not 'imatrix'");
  for (const char* key : {"imatrix.chunk_count", "imatrix.chunk_size"}) {
    auto v = g.get_uint(key);
    if (!v) return v.error();
    if (!*v) return make_error(std::string("missing metadata key '") + key + "'");
    if (**v > INT32_MAX) return make_error(std::string("'") + key + "' is out of range");
    (std::strcmp(key, "imatrix.chunk_count") == 0 ? m.chunk_count : m.chunk_size) = int32_t(**v);
  }
  auto datasets = g.get_array("imatrix.datasets");
  if (!datasets) return datasets.error();
  if (!*datasets) return make_error("missing metadata key 'imatrix.datasets'");
  auto names = gguf_array_strings(***datasets);
  if (!names) return make_error("imatrix.datasets: " + names.message());
  m.datasets.assign(names->begin(), names->end());

  // Pair each NAME.in_sum2 with its NAME.counts; other tensors (e.g. NAME.in_sum) are ignored.
  std::map<std::string, std::pair<const GgufTensorInfo*, const GgufTensorInfo*>> pairs;
  for (const GgufTensorInfo& t : g.tensors()) {
    if (ends_with(t.name, kSum2Suffix))
      pairs[std::string(t.name.substr(0, t.name.size() - kSum2Suffix.size()))].first = &t;
    else if (ends_with(t.name, kCountsSuffix))
      pairs[std::string(t.name.substr(0, t.name.size() - kCountsSuffix.size()))].second = &t;
  }
  if (pairs.empty()) return make_error("no importance matrix entries (no '.in_sum2' tensors)");
  for (const auto& [name, p] : pairs) {
    auto e = gguf_entry(name, p.first, p.second);
    if (!e) return e.error();
    m.entries.emplace(name, std::move(*e));
  }
  return m;
}

// A cursor over a legacy file's bytes that names what it was reading when they run out.
class LegacyReader {
 public:
  explicit LegacyReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  size_t left() const { return bytes_.size() - pos_; }
  Result<int32_t> i32(const std::string& what) {
    if (left() < 4) return truncated(what);
    int32_t v;
    std::memcpy(&v, bytes_.data() + pos_, 4);
    pos_ += 4;
    return v;
  }
  Result<std::span<const uint8_t>> take(size_t n, const std::string& what) {
    if (left() < n) return truncated(what);
    pos_ += n;
    return bytes_.subspan(pos_ - n, n);
  }

 private:
  Error truncated(const std::string& what) const {
    return make_error("truncated: the file ends inside " + what + " (at byte " +
                      std::to_string(bytes_.size()) + ")");
  }
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

Result<ImportanceMatrix> read_legacy(std::span<const uint8_t> bytes) {
  LegacyReader in(bytes);
  ImportanceMatrix m;
  m.legacy = true;
  auto n_entries = in.i32("the entry count");
  if (!n_entries) return n_entries.error();
  // Each entry takes at least 16 bytes: a name byte and three int32 fields plus one value.
  if (*n_entries <= 0 || size_t(*n_entries) > in.left() / 16)
    return make_error("not an importance matrix: the entry count " + std::to_string(*n_entries) +
                      " does not fit a GGUF or legacy .dat file of " +
                      std::to_string(bytes.size()) + " bytes");
  for (int32_t i = 0; i < *n_entries; ++i) {
    const std::string where = "entry " + std::to_string(i);
    auto len = in.i32(where + "'s name length");
    if (!len) return len.error();
    if (*len <= 0 || size_t(*len) > in.left())
      return make_error(where + " has a name length of " + std::to_string(*len) + " with " +
                        std::to_string(in.left()) + " bytes left");
    auto name_bytes = in.take(size_t(*len), where + "'s name");
    if (!name_bytes) return name_bytes.error();
    const std::string name(name_bytes->begin(), name_bytes->end());
    auto ncall = in.i32("the chunk count of '" + name + "'");
    if (!ncall) return ncall.error();
    if (*ncall <= 0)
      return make_error("'" + name + "' has a chunk count (ncall) of " + std::to_string(*ncall));
    auto nval = in.i32("the value count of '" + name + "'");
    if (!nval) return nval.error();
    if (*nval <= 0 || size_t(*nval) > in.left() / 4)
      return make_error("'" + name + "' has " + std::to_string(*nval) + " values with " +
                        std::to_string(in.left()) + " bytes left");
    auto raw = in.take(size_t(*nval) * 4, "the values of '" + name + "'");
    if (!raw) return raw.error();
    ImatrixEntry e;
    e.n_cols = *nval;
    e.importance.resize(size_t(*nval));
    std::memcpy(e.importance.data(), raw->data(), raw->size());
    if (const std::string bad = bad_value(e.importance); !bad.empty())
      return make_error("'" + name + "' has " + bad);
    for (float& v : e.importance) v /= float(*ncall);  // stored as mean square x ncall
    if (!m.entries.emplace(name, std::move(e)).second)
      return make_error("'" + name + "' appears twice");
  }
  // The optional tail: the chunk count, then the dataset's name.
  if (in.left() == 0) return m;
  auto chunks = in.i32("the trailing chunk count");
  if (!chunks) return chunks.error();
  m.chunk_count = std::max(*chunks, 0);
  if (in.left() == 0) return m;
  auto len = in.i32("the dataset name's length");
  if (!len) return len.error();
  if (*len < 0) return make_error("the dataset name's length is " + std::to_string(*len));
  auto dataset = in.take(size_t(*len), "the dataset name");
  if (!dataset) return dataset.error();
  if (*len > 0) m.datasets.emplace_back(dataset->begin(), dataset->end());
  if (in.left() != 0)
    return make_error(std::to_string(in.left()) + " unexpected bytes after the dataset name");
  return m;
}

}  // namespace

void ImatrixEntry::update_importance() {
  importance.resize(sum2.size());
  for (int32_t m = 0; m < n_mat; ++m) {
    const int64_t n = count(m);
    for (int64_t c = 0; c < n_cols; ++c) {
      const size_t i = size_t(m * n_cols + c);
      importance[i] = n > 0 ? float(double(sum2[i]) / double(n)) : 1.0f;
    }
  }
}

std::span<const float> ImatrixEntry::matrix_importance(int32_t mat, int64_t n) const {
  if (mat < 0 || n <= 0 || size_t((mat + 1) * n) > importance.size()) return {};
  if (!counts.empty() && n != n_cols) return {};  // a GGUF entry knows its width
  return std::span<const float>(importance).subspan(size_t(mat * n), size_t(n));
}

const ImatrixEntry* ImportanceMatrix::find(std::string_view tensor_name) const {
  const auto it = entries.find(tensor_name);
  return it == entries.end() ? nullptr : &it->second;
}

Result<ImportanceMatrix> read_imatrix(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot open '" + path + "': " + std::strerror(errno));
  char magic[4] = {};
  in.read(magic, 4);
  Result<ImportanceMatrix> m = make_error("");
  if (in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0) {
    in.close();
    m = read_gguf(path);
  } else {
    in.clear();
    in.seekg(0);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in),
                                     std::istreambuf_iterator<char>()};
    if (bytes.empty()) return make_error(path + ": empty file");
    m = read_legacy(bytes);
  }
  if (!m) return make_error(path + ": " + m.message());
  return m;
}

Status write_imatrix(const ImportanceMatrix& matrix, const std::string& path) {
  GgufWriter w;
  w.add_string("general.type", "imatrix");
  w.add_strings("imatrix.datasets", matrix.datasets);
  w.add_u32("imatrix.chunk_count", uint32_t(std::max(matrix.chunk_count, 0)));
  w.add_u32("imatrix.chunk_size", uint32_t(std::max(matrix.chunk_size, 0)));
  const auto bytes_of = [](const std::vector<float>& v) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()),
                                    v.size() * sizeof(float));
  };
  for (const auto& [name, e] : matrix.entries) {
    if (e.sum2.size() != size_t(e.n_mat * e.n_cols) ||
        (e.counts.size() != 1 && e.counts.size() != size_t(e.n_mat)))
      return make_error("imatrix entry '" + name + "' has no sums and counts of its shape");
    // Shapes as the reference writes them: a trailing 1 dropped, so [n_cols] and [1] for one
    // matrix, [n_cols, n_mat] and [1, n_mat] for a stack.
    std::vector<int64_t> sum_ne{e.n_cols}, count_ne{1};
    if (e.n_mat > 1) sum_ne.push_back(e.n_mat);
    if (e.counts.size() > 1) count_ne.push_back(int64_t(e.counts.size()));
    const std::vector<float> counts(e.counts.begin(), e.counts.end());
    if (Status s =
            w.add_tensor(name + std::string(kSum2Suffix), GgmlType::F32, sum_ne, bytes_of(e.sum2));
        !s)
      return s;
    if (Status s = w.add_tensor(name + std::string(kCountsSuffix), GgmlType::F32, count_ne,
                                bytes_of(counts));
        !s)
      return s;
  }
  return w.write_file(path);
}

}  // namespace vela
