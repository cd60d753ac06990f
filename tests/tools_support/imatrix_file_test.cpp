// Importance-matrix files: the shared reference-written GGUF imatrix reads with its shapes,
// counts and means; what write_imatrix writes reads back exactly, in the reference's tensor
// shapes; a legacy .dat file written here byte by byte in the reference's layout reads with its
// means; and every malformed file (truncated anywhere, wrong sizes or types, NaN, counts of 0,
// missing keys) is an error that names the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "support/shared_data.h"
#include "tools_support/imatrix_file.h"

namespace vela {
namespace {

std::string temp_path(const std::string& name) {
  return test::unique_temp_path("vela_imatrix_" + name);
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::span<const uint8_t> as_bytes(const std::vector<float>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)};
}

// A GGUF imatrix file with the given tensors (F32 unless said) and, with `metadata`, the three
// imatrix keys.
struct FakeTensor {
  std::string name;
  std::vector<int64_t> ne;
  std::vector<float> values;
};
std::string write_gguf(const std::string& file, const std::vector<FakeTensor>& tensors,
                       bool metadata = true) {
  GgufWriter w;
  w.add_string("general.type", "imatrix");
  if (metadata) {
    const std::vector<std::string> datasets{"calib.txt"};
    w.add_strings("imatrix.datasets", datasets);
    w.add_u32("imatrix.chunk_count", 2);
    w.add_u32("imatrix.chunk_size", 4);
  }
  for (const FakeTensor& t : tensors)
    EXPECT_TRUE(w.add_tensor(t.name, GgmlType::F32, t.ne, as_bytes(t.values)).ok()) << t.name;
  const std::string path = temp_path(file);
  EXPECT_TRUE(w.write_file(path).ok());
  return path;
}

// The legacy layout, little-endian.
struct LegacyBytes {
  std::vector<uint8_t> bytes;
  LegacyBytes& i32(int32_t v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + 4);
    return *this;
  }
  LegacyBytes& str(const std::string& s) {
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  LegacyBytes& f32s(const std::vector<float>& v) {
    const auto b = as_bytes(v);
    bytes.insert(bytes.end(), b.begin(), b.end());
    return *this;
  }
  // One entry: name, ncall, values (mean square x ncall, as the reference stores them).
  LegacyBytes& entry(const std::string& name, int32_t ncall, const std::vector<float>& values) {
    return i32(int32_t(name.size())).str(name).i32(ncall).i32(int32_t(values.size())).f32s(values);
  }
};

// The error message of reading `path`, or a failure when it reads.
std::string read_error(const std::string& path) {
  auto m = read_imatrix(path);
  EXPECT_FALSE(m.ok()) << path << " read without an error";
  return m.ok() ? std::string() : m.message();
}

TEST(ImatrixFile, ReadsTheSharedReferenceFile) {
  VELA_REQUIRE_SHARED();
  auto m = read_imatrix(test::shared_path("imatrix/tiny-llama-256.imatrix.gguf").string());
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_FALSE(m->legacy);
  EXPECT_EQ(m->datasets, std::vector<std::string>{"calib.txt"});
  EXPECT_EQ(m->chunk_count, 9);
  EXPECT_EQ(m->chunk_size, 256);
  ASSERT_EQ(m->entries.size(), 28u);  // 7 matrices x 4 layers, a sums and a counts tensor each
  for (int layer = 0; layer < 4; ++layer)
    for (const char* kind :
         {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
      const std::string name = "blk." + std::to_string(layer) + "." + kind + ".weight";
      const ImatrixEntry* e = m->find(name);
      ASSERT_NE(e, nullptr) << name;
      EXPECT_EQ(e->n_cols, std::string(kind) == "ffn_down" ? 768 : 256) << name;
      EXPECT_EQ(e->n_mat, 1);
      ASSERT_EQ(e->counts.size(), 1u);
      EXPECT_EQ(e->counts[0], 2304) << name;  // 9 chunks x 256 tokens
      ASSERT_EQ(e->importance.size(), size_t(e->n_cols));
      for (int64_t c = 0; c < e->n_cols; ++c) {
        EXPECT_FLOAT_EQ(e->importance[size_t(c)], e->sum2[size_t(c)] / 2304.0f) << name;
        EXPECT_GT(e->importance[size_t(c)], 0.0f) << name << " column " << c;
      }
      EXPECT_EQ(e->matrix_importance(0, e->n_cols).size(), size_t(e->n_cols));
      EXPECT_TRUE(e->matrix_importance(0, e->n_cols + 1).empty());  // not this tensor's width
    }
  // The normalised input of attn_q/k/v is one vector: their sums are the same.
  const ImatrixEntry& q = *m->find("blk.2.attn_q.weight");
  const ImatrixEntry& k = *m->find("blk.2.attn_k.weight");
  EXPECT_EQ(q.sum2, k.sum2);
}

TEST(ImatrixFile, WriteThenReadIsExactInTheReferenceShapes) {
  ImportanceMatrix m;
  m.datasets = {"a.txt", "b.txt"};
  m.chunk_count = 3;
  m.chunk_size = 64;
  ImatrixEntry dense;
  dense.n_cols = 5;
  dense.sum2 = {1.0f, 2.5f, 0.0f, 1e-7f, 3e6f};
  dense.counts = {192};
  dense.update_importance();
  m.entries["blk.0.attn_q.weight"] = dense;
  ImatrixEntry experts;  // 3 experts of 4 columns, expert 1 never chosen
  experts.n_cols = 4;
  experts.n_mat = 3;
  experts.sum2 = {1, 2, 3, 4, 0, 0, 0, 0, 8, 8, 8, 8};
  experts.counts = {10, 0, 4};
  experts.update_importance();
  m.entries["blk.0.ffn_down_exps.weight"] = experts;
  ImatrixEntry heads;  // a non-routed stack: one count for all
  heads.n_cols = 2;
  heads.n_mat = 2;
  heads.sum2 = {4, 6, 8, 10};
  heads.counts = {2};
  heads.update_importance();
  m.entries["blk.1.attn_k_b.weight"] = heads;

  const std::string path = temp_path("roundtrip.gguf");
  ASSERT_TRUE(write_imatrix(m, path).ok());
  auto back = read_imatrix(path);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->datasets, m.datasets);
  EXPECT_EQ(back->chunk_count, 3);
  EXPECT_EQ(back->chunk_size, 64);
  ASSERT_EQ(back->entries.size(), 3u);
  for (const auto& [name, e] : m.entries) {
    const ImatrixEntry* r = back->find(name);
    ASSERT_NE(r, nullptr) << name;
    EXPECT_EQ(r->n_cols, e.n_cols) << name;
    EXPECT_EQ(r->n_mat, e.n_mat) << name;
    EXPECT_EQ(r->sum2, e.sum2) << name;
    EXPECT_EQ(r->counts, e.counts) << name;
    EXPECT_EQ(r->importance, e.importance) << name;
  }
  const ImatrixEntry& ex = *back->find("blk.0.ffn_down_exps.weight");
  EXPECT_FLOAT_EQ(ex.importance[0], 0.1f);                                // 1 / 10
  EXPECT_FLOAT_EQ(ex.importance[8], 2.0f);                                // 8 / 4
  for (int c = 4; c < 8; ++c) EXPECT_EQ(ex.importance[size_t(c)], 1.0f);  // no rows: neutral
  EXPECT_EQ(ex.matrix_importance(2, 4)[3], 2.0f);
  EXPECT_FLOAT_EQ(back->find("blk.1.attn_k_b.weight")->importance[3], 5.0f);  // 10 / 2

  // The tensors as the reference writes them: trailing 1s dropped, in name order.
  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok()) << g.message();
  ASSERT_EQ(g->tensors().size(), 6u);
  const auto shape = [&](const std::string& name) {
    const GgufTensorInfo* t = g->find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    return t ? std::vector<int64_t>(t->ne, t->ne + t->n_dims) : std::vector<int64_t>{};
  };
  EXPECT_EQ(shape("blk.0.attn_q.weight.in_sum2"), (std::vector<int64_t>{5}));
  EXPECT_EQ(shape("blk.0.attn_q.weight.counts"), (std::vector<int64_t>{1}));
  EXPECT_EQ(shape("blk.0.ffn_down_exps.weight.in_sum2"), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(shape("blk.0.ffn_down_exps.weight.counts"), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(shape("blk.1.attn_k_b.weight.in_sum2"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(shape("blk.1.attn_k_b.weight.counts"), (std::vector<int64_t>{1}));
  EXPECT_EQ(g->tensors()[0].name, "blk.0.attn_q.weight.in_sum2");
  EXPECT_EQ(g->tensors()[1].name, "blk.0.attn_q.weight.counts");
  auto type = g->get_string("general.type");
  ASSERT_TRUE(type.ok() && type->has_value());
  EXPECT_EQ(**type, "imatrix");
}

TEST(ImatrixFile, ReadsTheLegacyDatLayout) {
  LegacyBytes b;
  b.i32(2)
      .entry("blk.0.ffn_up.weight", 4, {4.0f, 8.0f, 0.0f})  // means 1, 2, 0
      .entry("blk.0.ffn_gate_exps.weight", 2, {2, 4, 6, 8})
      .i32(4)  // chunks
      .i32(9)
      .str("calib.txt");
  const std::string path = temp_path("legacy.dat");
  write_bytes(path, b.bytes);
  auto m = read_imatrix(path);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_TRUE(m->legacy);
  EXPECT_EQ(m->chunk_count, 4);
  EXPECT_EQ(m->chunk_size, 0);  // not recorded by the layout
  EXPECT_EQ(m->datasets, std::vector<std::string>{"calib.txt"});
  ASSERT_EQ(m->entries.size(), 2u);
  const ImatrixEntry& up = *m->find("blk.0.ffn_up.weight");
  EXPECT_EQ(up.importance, (std::vector<float>{1.0f, 2.0f, 0.0f}));
  EXPECT_TRUE(up.sum2.empty());
  EXPECT_TRUE(up.counts.empty());
  // Two experts of 2 columns side by side: the caller slices by the tensor's width.
  const ImatrixEntry& ex = *m->find("blk.0.ffn_gate_exps.weight");
  const auto second = ex.matrix_importance(1, 2);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0], 3.0f);
  EXPECT_EQ(second[1], 4.0f);
  EXPECT_TRUE(ex.matrix_importance(2, 2).empty());

  // The tail is optional: entries alone, or entries and the chunk count.
  LegacyBytes bare;
  bare.i32(1).entry("blk.1.attn_v.weight", 1, {0.5f});
  write_bytes(path, bare.bytes);
  m = read_imatrix(path);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->chunk_count, 0);
  EXPECT_TRUE(m->datasets.empty());
  bare.i32(7);
  write_bytes(path, bare.bytes);
  m = read_imatrix(path);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->chunk_count, 7);
}

TEST(ImatrixFile, EveryTruncationOfALegacyFileIsAnError) {
  LegacyBytes b;
  b.i32(2).entry("blk.0.attn_q.weight", 3, {1, 2}).entry("blk.0.attn_k.weight", 3, {3, 4});
  const size_t entries_end = b.bytes.size();
  b.i32(3).i32(5).str("x.txt");
  const std::string path = temp_path("cut.dat");
  for (size_t n = 1; n < b.bytes.size(); ++n) {
    if (n == entries_end || n == entries_end + 4) continue;  // the tail's optional parts
    write_bytes(path, {b.bytes.begin(), b.bytes.begin() + std::ptrdiff_t(n)});
    const std::string err = read_error(path);
    EXPECT_FALSE(err.empty()) << "cut at " << n;
  }
  write_bytes(path, b.bytes);
  EXPECT_TRUE(read_imatrix(path).ok());
}

TEST(ImatrixFile, MalformedLegacyFilesNameTheProblem) {
  const std::string path = temp_path("bad.dat");
  const auto error_of = [&](const LegacyBytes& b) {
    write_bytes(path, b.bytes);
    return read_error(path);
  };
  LegacyBytes zero_calls;
  zero_calls.i32(1).entry("blk.0.attn_q.weight", 0, {1, 2});
  EXPECT_NE(error_of(zero_calls).find("ncall"), std::string::npos) << error_of(zero_calls);
  LegacyBytes nan;
  nan.i32(1).entry("blk.0.attn_q.weight", 1, {1, NAN});
  EXPECT_NE(error_of(nan).find("NaN"), std::string::npos) << error_of(nan);
  LegacyBytes negative;
  negative.i32(1).entry("blk.0.attn_q.weight", 1, {-1});
  EXPECT_NE(error_of(negative).find("negative"), std::string::npos);
  LegacyBytes huge_nval;
  huge_nval.i32(1).i32(1).str("x").i32(1).i32(1 << 30).f32s({1, 2});
  EXPECT_NE(error_of(huge_nval).find("values"), std::string::npos) << error_of(huge_nval);
  LegacyBytes twice;
  twice.i32(2).entry("a", 1, {1}).entry("a", 1, {1});
  EXPECT_NE(error_of(twice).find("twice"), std::string::npos);
  LegacyBytes junk;
  junk.i32(1).entry("a", 1, {1}).i32(1).i32(1).str("xy");
  EXPECT_NE(error_of(junk).find("unexpected bytes"), std::string::npos) << error_of(junk);
  LegacyBytes no_entries;
  no_entries.i32(0);
  EXPECT_NE(error_of(no_entries).find("entry count"), std::string::npos);
  EXPECT_NE(error_of(LegacyBytes{}).find("empty"), std::string::npos);
  EXPECT_NE(read_error("/nonexistent/imatrix.gguf").find("/nonexistent/imatrix.gguf"),
            std::string::npos);
}

TEST(ImatrixFile, MalformedGgufFilesNameTheProblem) {
  const FakeTensor sums{"w.in_sum2", {2}, {1, 2}};
  const FakeTensor count{"w.counts", {1}, {4}};
  // Sanity: the well-formed pair reads.
  auto ok = read_imatrix(write_gguf("ok.gguf", {sums, count}));
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_FLOAT_EQ(ok->find("w")->importance[1], 0.5f);

  const auto error_of = [&](const std::vector<FakeTensor>& t, bool metadata = true) {
    return read_error(write_gguf("bad.gguf", t, metadata));
  };
  EXPECT_NE(error_of({sums, {"w.counts", {1}, {0}}}).find("are 0"), std::string::npos);
  EXPECT_NE(error_of({{"w.in_sum2", {2}, {1, NAN}}, count}).find("NaN"), std::string::npos);
  EXPECT_NE(error_of({sums, {"w.counts", {1}, {INFINITY}}}).find("infinity"), std::string::npos);
  EXPECT_NE(error_of({sums, {"w.counts", {1}, {-4}}}).find("negative"), std::string::npos);
  EXPECT_NE(error_of({sums, {"w.counts", {1}, {2.5f}}}).find("impossible count"),
            std::string::npos);
  EXPECT_NE(error_of({{"w.in_sum2", {2, 2}, {1, 2, 3, 4}}, {"w.counts", {1, 3}, {1, 1, 1}}})
                .find("3 values for 2 matrices"),
            std::string::npos);
  EXPECT_NE(error_of({{"w.in_sum2", {1, 2, 2}, {1, 2, 3, 4}}, count}).find("must be"),
            std::string::npos);
  EXPECT_NE(error_of({sums}).find("no matching '.counts'"), std::string::npos);
  EXPECT_NE(error_of({count}).find("no matching '.in_sum2'"), std::string::npos);
  EXPECT_NE(error_of({{"w.in_sum2", {2, 2}, {1, 2, 3, 4}}, {"w.counts", {1, 2}, {1, 0}}})
                .find("a count of 0"),
            std::string::npos);
  EXPECT_NE(error_of({{"other.weight", {1}, {1}}}).find("no importance matrix entries"),
            std::string::npos);
  EXPECT_NE(error_of({sums, count}, false).find("imatrix.chunk_count"), std::string::npos);

  // A tensor of another type.
  GgufWriter w;
  w.add_string("general.type", "imatrix");
  const std::vector<std::string> datasets{"calib.txt"};
  w.add_strings("imatrix.datasets", datasets);
  w.add_u32("imatrix.chunk_count", 1);
  w.add_u32("imatrix.chunk_size", 4);
  const std::vector<uint8_t> half(4, 0);
  const int64_t ne2[] = {2}, ne1[] = {1};
  ASSERT_TRUE(w.add_tensor("w.in_sum2", GgmlType::F16, ne2, half).ok());
  ASSERT_TRUE(w.add_tensor("w.counts", GgmlType::F32, ne1, as_bytes({1.0f})).ok());
  const std::string f16 = temp_path("f16.gguf");
  ASSERT_TRUE(w.write_file(f16).ok());
  EXPECT_NE(read_error(f16).find("expected F32"), std::string::npos) << read_error(f16);

  // A model file is not an importance matrix.
  GgufWriter model;
  model.add_string("general.type", "model");
  const std::string model_path = temp_path("model.gguf");
  ASSERT_TRUE(model.write_file(model_path).ok());
  EXPECT_NE(read_error(model_path).find("not 'imatrix'"), std::string::npos);

  // Every truncation of a well-formed file before its last tensor's end (what follows is
  // alignment padding) is an error, never a crash.
  const std::string whole = write_gguf("whole.gguf", {sums, count});
  std::ifstream in(whole, std::ios::binary);
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in),
                                   std::istreambuf_iterator<char>()};
  auto g = GgufFile::open(whole);
  ASSERT_TRUE(g.ok());
  const GgufTensorInfo& last = g->tensors().back();
  const size_t data_end = size_t(g->data_offset() + last.offset + last.n_bytes);
  ASSERT_LE(data_end, bytes.size());
  const std::string cut = temp_path("cut.gguf");
  for (size_t n = 1; n < data_end; n += (n < 64 ? 1 : 7)) {
    write_bytes(cut, {bytes.begin(), bytes.begin() + std::ptrdiff_t(n)});
    EXPECT_FALSE(read_imatrix(cut).ok()) << "cut at " << n;
  }
}

}  // namespace
}  // namespace vela
