// GGUF reader: every metadata value type, versions 2 and 3, alignment, tensor infos, and the
// shared models.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "support/shared_data.h"

namespace vela {
namespace {

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return {p, p + v.size() * sizeof(float)};
}

TEST(Gguf, ReadsEveryValueTypeAndNestedArrays) {
  for (uint32_t version : {2u, 3u}) {
    GgufWriter w(version);
    GgufEncoder e;
    w.add_raw("u8", GgufValueType::UINT8, GgufEncoder().pod<uint8_t>(200).bytes);
    w.add_raw("i8", GgufValueType::INT8, GgufEncoder().pod<int8_t>(-100).bytes);
    w.add_raw("u16", GgufValueType::UINT16, GgufEncoder().pod<uint16_t>(60000).bytes);
    w.add_raw("i16", GgufValueType::INT16, GgufEncoder().pod<int16_t>(-30000).bytes);
    w.add_u32("u32", 4000000000u);
    w.add_i32("i32", -2000000000);
    w.add_f32("f32", 1.5f);
    w.add_bool("bool", true);
    w.add_string("str", "héllo");
    w.add_u64("u64", 18000000000000000000ull);
    w.add_raw("i64", GgufValueType::INT64,
              GgufEncoder().pod<int64_t>(-9000000000000000000ll).bytes);
    w.add_raw("f64", GgufValueType::FLOAT64, GgufEncoder().pod<double>(2.25).bytes);
    const std::vector<std::string> strs = {"a", "", "ccc"};
    w.add_strings("strs", strs);
    // [[1, 2], [3]] as an array of arrays of i32.
    GgufEncoder nested;
    nested.array_header(GgufValueType::INT32, 2).pod<int32_t>(1).pod<int32_t>(2);
    nested.array_header(GgufValueType::INT32, 1).pod<int32_t>(3);
    GgufEncoder outer;
    outer.array_header(GgufValueType::ARRAY, 2);
    outer.bytes.insert(outer.bytes.end(), nested.bytes.begin(), nested.bytes.end());
    w.add_raw("nested", GgufValueType::ARRAY, outer.bytes);

    auto f = GgufFile::from_bytes(w.to_bytes());
    ASSERT_TRUE(f.ok()) << f.message();
    EXPECT_EQ(f->version(), version);
    EXPECT_EQ(*f->get_uint("u8").value(), 200u);
    EXPECT_EQ(*f->get_int("i8").value(), -100);
    EXPECT_EQ(*f->get_uint("u16").value(), 60000u);
    EXPECT_EQ(*f->get_int("i16").value(), -30000);
    EXPECT_EQ(*f->get_uint("u32").value(), 4000000000u);
    EXPECT_EQ(*f->get_int("i32").value(), -2000000000);
    EXPECT_FLOAT_EQ(float(*f->get_float("f32").value()), 1.5f);
    EXPECT_TRUE(*f->get_bool("bool").value());
    EXPECT_EQ(*f->get_string("str").value(), "héllo");
    EXPECT_EQ(*f->get_uint("u64").value(), 18000000000000000000ull);
    EXPECT_EQ(*f->get_int("i64").value(), -9000000000000000000ll);
    EXPECT_DOUBLE_EQ(*f->get_float("f64").value(), 2.25);
    auto arr = f->get_array("strs");
    ASSERT_TRUE(arr.ok() && arr->has_value());
    auto got = gguf_array_strings(***arr);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->size(), 3u);
    EXPECT_EQ((*got)[2], "ccc");
    auto nest = f->get_array("nested");
    ASSERT_TRUE(nest.ok() && nest->has_value());
    const GgufArray& n = ***nest;
    ASSERT_EQ(n.items.size(), 2u);
    EXPECT_EQ(n.items[0].array->items[1].i64, 2);
    EXPECT_EQ(n.items[1].array->items[0].i64, 3);
    // Wrong-type access is an error naming the key, absence is nullopt.
    EXPECT_FALSE(f->get_string("u32").ok());
    EXPECT_NE(f->get_string("u32").message().find("u32"), std::string::npos);
    EXPECT_FALSE(f->get_string("missing").value().has_value());
    EXPECT_FALSE(f->get_uint("i8").ok());  // negative
  }
}

TEST(Gguf, TensorsAreAlignedViewsIntoTheFile) {
  for (uint32_t alignment : {32u, 64u, 256u}) {
    GgufWriter w;
    w.set_alignment(alignment);
    const std::vector<float> a = {1, 2, 3};
    const std::vector<float> b = {4, 5, 6, 7, 8, 9};
    const int64_t ne_a[] = {3};
    const int64_t ne_b[] = {3, 2};
    ASSERT_TRUE(w.add_tensor("a", GgmlType::F32, ne_a, f32_bytes(a)).ok());
    ASSERT_TRUE(w.add_tensor("b", GgmlType::F32, ne_b, f32_bytes(b)).ok());
    auto f = GgufFile::from_bytes(w.to_bytes());
    ASSERT_TRUE(f.ok()) << f.message();
    EXPECT_EQ(f->alignment(), alignment);
    EXPECT_EQ(f->data_offset() % alignment, 0u);
    const GgufTensorInfo* tb = f->find_tensor("b");
    ASSERT_NE(tb, nullptr);
    EXPECT_EQ(tb->n_dims, 2u);
    EXPECT_EQ(tb->ne[0], 3);
    EXPECT_EQ(tb->ne[1], 2);
    EXPECT_EQ(tb->n_bytes, 24u);
    EXPECT_EQ(tb->offset % alignment, 0u);
    EXPECT_EQ(reinterpret_cast<const float*>(tb->data)[5], 9.0f);
    EXPECT_EQ(reinterpret_cast<const float*>(f->find_tensor("a")->data)[0], 1.0f);
  }
}

// Integer tensors (an EAGLE-3 head's d2t ids) are read as data, one element per block; a type
// the reader does not know is refused naming the tensor.
TEST(Gguf, IntegerTensorsAreDataAndUnknownTypesAreNamed) {
  GgufWriter w;
  const std::vector<float> a(32, 1.0f);
  const int64_t ne[] = {32};
  ASSERT_TRUE(w.add_tensor("blk.0.attn_q.weight", GgmlType::F32, ne, f32_bytes(a)).ok());
  std::vector<uint8_t> bytes = w.to_bytes();
  // Patch the type field (after name, n_dims, one dim): I32 (26) takes the F32 tensor's 4 bytes
  // per element.
  const std::string name = "blk.0.attn_q.weight";
  auto it = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  ASSERT_NE(it, bytes.end());
  const size_t type_pos = size_t(it - bytes.begin()) + name.size() + 4 + 8;
  bytes[type_pos] = 26;
  auto f = GgufFile::from_bytes(bytes);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->tensors()[0].type, 26u);
  EXPECT_EQ(f->tensors()[0].n_bytes, 32 * 4);
  bytes[type_pos] = 99;
  f = GgufFile::from_bytes(bytes);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.message().find("unsupported tensor type"), std::string::npos) << f.message();
  EXPECT_NE(f.message().find("'blk.0.attn_q.weight'"), std::string::npos) << f.message();
}

// Every shared model opens, whatever mix of weight types it holds.
TEST(Gguf, OpensEverySharedModelMapped) {
  VELA_REQUIRE_SHARED();
  int opened = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::shared_path("models"))) {
    if (entry.path().extension() != ".gguf") continue;
    auto f = GgufFile::open(entry.path().string());
    ASSERT_TRUE(f.ok()) << entry.path() << ": " << f.message();
    ++opened;
    EXPECT_EQ(f->version(), 3u);
    EXPECT_GT(f->tensors().size(), 0u);
    EXPECT_TRUE(f->get_string("general.architecture").value().has_value());
    for (const auto& t : f->tensors()) {
      EXPECT_GE(t.data, reinterpret_cast<const uint8_t*>(0) + 1);
      EXPECT_LE(f->data_offset() + t.offset + t.n_bytes, f->file_size());
    }
  }
  EXPECT_GE(opened, 48);
}

TEST(Gguf, MissingFileIsAClearError) {
  auto f = GgufFile::open("/nonexistent/model.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.message().find("/nonexistent/model.gguf"), std::string::npos);
}

}  // namespace
}  // namespace vela
