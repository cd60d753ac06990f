// KV-cache storage: type names, sizes (q8_0 about half of f16), round trips within each type's
// rounding bound, slots and layers kept apart, and concurrent writes to different slots.
#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "util/half.h"

namespace vela {
namespace {

std::vector<float> random_row(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(KvCache, ParsesAndNamesEveryType) {
  for (KvType t : {KvType::kF32, KvType::kF16, KvType::kBF16, KvType::kQ8_0}) {
    auto parsed = parse_kv_type(kv_type_name(t));
    ASSERT_TRUE(parsed.ok()) << kv_type_name(t);
    EXPECT_EQ(*parsed, t);
  }
  auto bad = parse_kv_type("q4_0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("q8_0"), std::string::npos) << bad.message();
  EXPECT_FALSE(parse_kv_type("F16").ok());  // names are lower case, as on the command line
}

TEST(KvCache, HeadRowSizes) {
  EXPECT_EQ(kv_head_row_bytes(KvType::kF32, 128), 512u);
  EXPECT_EQ(kv_head_row_bytes(KvType::kF16, 128), 256u);
  EXPECT_EQ(kv_head_row_bytes(KvType::kBF16, 128), 256u);
  EXPECT_EQ(kv_head_row_bytes(KvType::kQ8_0, 128), 4 * 34u);  // four GGUF Q8_0 blocks
  EXPECT_EQ(kv_head_row_bytes(KvType::kQ8_0, 16), 2 + 16u);   // one short block
  EXPECT_EQ(kv_head_row_bytes(KvType::kQ8_0, 80), 2 * 34u + 2 + 16);

  const KvCacheConfig f16{4, 8, 128, 16, 10, KvType::kF16};
  KvCacheConfig q8 = f16;
  q8.type = KvType::kQ8_0;
  const double ratio = double(KvCache::bytes_per_block(q8)) / double(KvCache::bytes_per_block(f16));
  EXPECT_NEAR(ratio, 34.0 / 64.0, 1e-9);  // about half the memory of f16
  KvCache cache(q8);
  EXPECT_EQ(cache.bytes(), KvCache::bytes_per_block(q8) * 10);
  EXPECT_EQ(q8.row_bytes(0), 8 * 4 * 34u);
}

// Bound on |decoded - x| for each element of a head row of `type`.
std::vector<float> error_bound(KvType type, const std::vector<float>& x) {
  std::vector<float> bound(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float a = std::abs(x[i]);
    switch (type) {
      case KvType::kF32:
        bound[i] = 0;
        break;
      case KvType::kF16:
        bound[i] = std::max(a * 0x1p-11f, 0x1p-25f);
        break;  // half an ulp
      case KvType::kBF16:
        bound[i] = a * 0x1p-8f;
        break;
      case KvType::kQ8_0: {
        // Half a quantization step of the element's block, plus the f16 rounding of the scale
        // times up to 127 (relative 2^-11, or absolute 2^-25 once the scale is subnormal).
        const size_t b0 = i / 32 * 32, b1 = std::min(x.size(), b0 + 32);
        float amax = 0;
        for (size_t j = b0; j < b1; ++j) amax = std::max(amax, std::abs(x[j]));
        bound[i] = amax / 254.0f + 127.0f * std::max(amax / 127.0f * 0x1p-11f, 0x1p-25f) + 1e-7f;
        break;
      }
    }
  }
  return bound;
}

TEST(KvCache, HeadRowRoundTripWithinEachTypesBound) {
  for (KvType type : {KvType::kF32, KvType::kF16, KvType::kBF16, KvType::kQ8_0}) {
    for (int32_t head_dim : {16, 32, 48, 64, 128}) {
      for (float scale : {1e-3f, 1.0f, 30.0f}) {
        std::vector<float> x =
            random_row(size_t(head_dim), uint32_t(head_dim * 7 + int(scale)), scale);
        x[3] = 0.0f;  // exact zero stays zero
        std::vector<uint8_t> stored(kv_head_row_bytes(type, head_dim));
        std::vector<float> back(static_cast<size_t>(head_dim));
        kv_encode_head_row(type, x.data(), head_dim, stored.data());
        kv_decode_head_row(type, stored.data(), head_dim, back.data());
        const auto bound = error_bound(type, x);
        for (int32_t i = 0; i < head_dim; ++i)
          ASSERT_LE(std::abs(back[size_t(i)] - x[size_t(i)]), bound[size_t(i)])
              << kv_type_name(type) << " head_dim " << head_dim << " scale " << scale << " i " << i;
        EXPECT_EQ(back[3], 0.0f);
      }
    }
  }
}

TEST(KvCache, Q8RowsUseTheGgufBlockLayout) {
  // A row whose largest magnitude is 127 has scale 1, so the int8 values are the rounded inputs.
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = float(i * 4) - 64.6f;
  x[31] = 127.0f;
  KvQ8Block block;
  kv_encode_head_row(KvType::kQ8_0, x.data(), 32, &block);
  EXPECT_EQ(fp16_to_fp32(block.d), 1.0f);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(block.q[i], int8_t(std::round(x[size_t(i)]))) << i;
  // An all-zero block decodes to zeros (scale 0, no division by zero).
  std::vector<float> zeros(32, 0.0f), back(32, 1.0f);
  kv_encode_head_row(KvType::kQ8_0, zeros.data(), 32, &block);
  kv_decode_head_row(KvType::kQ8_0, &block, 32, back.data());
  for (float v : back) EXPECT_EQ(v, 0.0f);
}

TEST(KvCache, SlotsLayersAndKvAreKeptApart) {
  for (KvType type : {KvType::kF32, KvType::kF16, KvType::kBF16, KvType::kQ8_0}) {
    const KvCacheConfig config{3, 2, 48, 4, 3, type};
    KvCache cache(config);
    const size_t n = size_t(config.n_head_kv) * size_t(config.head_dim);
    // Write every (layer, slot) with its own values, then read them all back.
    const auto k_of = [&](int32_t l, int64_t s) { return random_row(n, uint32_t(l * 100 + s)); };
    const auto v_of = [&](int32_t l, int64_t s) {
      return random_row(n, uint32_t(l * 100 + s + 50));
    };
    for (int32_t l = 0; l < config.n_layer; ++l)
      for (int64_t s = 0; s < cache.n_slots(); ++s)
        cache.write(l, s, k_of(l, s).data(), v_of(l, s).data());
    std::vector<float> k(n), v(n);
    for (int32_t l = 0; l < config.n_layer; ++l)
      for (int64_t s = 0; s < cache.n_slots(); ++s) {
        cache.read(l, s, k.data(), v.data());
        const auto ek = k_of(l, s), ev = v_of(l, s);
        // Per head row bounds (q8_0 blocks do not cross heads).
        for (int32_t h = 0; h < config.n_head_kv; ++h) {
          const size_t o = size_t(h) * 48;
          const std::vector<float> hk(ek.begin() + long(o), ek.begin() + long(o + 48));
          const std::vector<float> hv(ev.begin() + long(o), ev.begin() + long(o + 48));
          const auto bk = error_bound(type, hk), bv = error_bound(type, hv);
          for (size_t i = 0; i < 48; ++i) {
            ASSERT_LE(std::abs(k[o + i] - hk[i]), bk[i])
                << kv_type_name(type) << " layer " << l << " slot " << s;
            ASSERT_LE(std::abs(v[o + i] - hv[i]), bv[i])
                << kv_type_name(type) << " layer " << l << " slot " << s;
          }
        }
      }
  }
}

// A K-only cache (multi-head latent attention) holds one row per slot and layer: half the bytes
// of a K/V cache of the same rows, its V row the K row, rows of layers and slots apart.
TEST(KvCache, KOnlyCacheHoldsOneRowPerSlot) {
  for (KvType type : {KvType::kF32, KvType::kF16, KvType::kQ8_0}) {
    KvCacheConfig config{3, 1, 80, 4, 5, type};
    const size_t kv_bytes = KvCache::bytes_per_block(config);
    config.k_only = true;
    EXPECT_EQ(KvCache::bytes_per_block(config) * 2, kv_bytes) << kv_type_name(type);
    EXPECT_EQ(KvCache::bytes_per_block(config),
              size_t(3) * 4 * kv_head_row_bytes(type, 80));  // layers x slots x one row
    KvCache cache(config);
    EXPECT_EQ(cache.bytes(), KvCache::bytes_per_block(config) * 5);
    const size_t n = size_t(config.n_head_kv) * size_t(config.head_dim);
    const auto row_of = [&](int32_t l, int64_t s) { return random_row(n, uint32_t(l * 100 + s)); };
    for (int32_t l = 0; l < config.n_layer; ++l)
      for (int64_t s = 0; s < cache.n_slots(); ++s) cache.write(l, s, row_of(l, s).data(), nullptr);
    std::vector<float> k(n);
    for (int32_t l = 0; l < config.n_layer; ++l)
      for (int64_t s = 0; s < cache.n_slots(); ++s) {
        cache.read(l, s, k.data(), nullptr);
        const auto want = row_of(l, s);
        const auto bound = error_bound(type, want);
        for (size_t i = 0; i < n; ++i)
          ASSERT_LE(std::abs(k[i] - want[i]), bound[i])
              << kv_type_name(type) << " layer " << l << " slot " << s;
        EXPECT_EQ(std::as_const(cache).v_row(l, s), std::as_const(cache).k_row(l, s));
      }
  }
}

TEST(KvCache, ConcurrentWritesToDifferentSlotsMatchSerialWrites) {
  const KvCacheConfig config{2, 2, 32, 16, 4, KvType::kQ8_0};
  KvCache serial(config), parallel(config);
  const size_t n = size_t(config.n_head_kv) * size_t(config.head_dim);
  std::vector<std::vector<float>> rows;
  for (int64_t s = 0; s < serial.n_slots(); ++s) rows.push_back(random_row(n, uint32_t(s)));
  for (int32_t l = 0; l < 2; ++l)
    for (int64_t s = 0; s < serial.n_slots(); ++s)
      serial.write(l, s, rows[size_t(s)].data(), rows[size_t(s)].data());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int32_t l = 0; l < 2; ++l)
        for (int64_t s = t; s < parallel.n_slots(); s += 4)
          parallel.write(l, s, rows[size_t(s)].data(), rows[size_t(s)].data());
    });
  for (auto& th : threads) th.join();
  for (int32_t l = 0; l < 2; ++l)
    for (int64_t s = 0; s < serial.n_slots(); ++s)
      ASSERT_EQ(0, std::memcmp(std::as_const(serial).k_row(l, s),
                               std::as_const(parallel).k_row(l, s), config.row_bytes(l)));
}

// Layers in groups, each layer with rows of its own geometry (as gemma4's sliding and full layers
// differ): a block is as large as the largest group's layers, each layer's rows lie inside the
// block, and a block serving one group keeps the rows of that group's layers apart.
TEST(KvCache, GroupsOfLayersWithRowsOfTheirOwnWidths) {
  for (KvType type : {KvType::kF16, KvType::kQ8_0}) {
    KvCacheConfig config{5, 2, 32, 4, 6, type};
    config.group_windows = {8, 0, 8};
    config.layer_group = {0, 1, 0, 2, 2};
    config.layer_shapes = {{2, 32}, {1, 16}, {2, 32}, {2, 32}, {4, 8}};
    const size_t planes = 2, bs = 4;
    const size_t group0 = planes * bs * 2 * config.row_bytes(0);
    const size_t group2 = planes * bs * (config.row_bytes(3) + config.row_bytes(4));
    ASSERT_EQ(config.row_bytes(1), kv_head_row_bytes(type, 16));
    ASSERT_EQ(config.row_bytes(4), 4 * kv_head_row_bytes(type, 8));
    EXPECT_EQ(KvCache::bytes_per_block(config), std::max(group0, group2));
    KvCache cache(config);
    const size_t block_bytes = KvCache::bytes_per_block(config);
    EXPECT_EQ(cache.bytes(), block_bytes * 6);
    // Block b serves group b % 3; every row of a layer of that group inside block b.
    const auto* base = static_cast<const uint8_t*>(std::as_const(cache).k_row(0, 0));
    const auto values = [&](int32_t l) {
      const KvRowShape s = config.layer_shape(l);
      return size_t(s.n_head_kv) * size_t(s.head_dim);
    };
    const auto k_of = [&](int32_t l, int64_t s) {
      return random_row(values(l), uint32_t(l * 97 + s));
    };
    const auto v_of = [&](int32_t l, int64_t s) {
      return random_row(values(l), uint32_t(l * 97 + s + 5000));
    };
    for (int64_t s = 0; s < cache.n_slots(); ++s) {
      const int32_t block = int32_t(s / 4);
      for (int32_t l = 0; l < config.n_layer; ++l) {
        if (config.group_of(l) != block % 3) continue;
        for (const void* row :
             {std::as_const(cache).k_row(l, s), std::as_const(cache).v_row(l, s)}) {
          const size_t at = size_t(static_cast<const uint8_t*>(row) - base);
          EXPECT_GE(at, size_t(block) * block_bytes);
          EXPECT_LE(at + config.row_bytes(l), size_t(block + 1) * block_bytes);
        }
        cache.write(l, s, k_of(l, s).data(), v_of(l, s).data());
      }
    }
    for (int64_t s = 0; s < cache.n_slots(); ++s)
      for (int32_t l = 0; l < config.n_layer; ++l) {
        if (config.group_of(l) != int32_t(s / 4) % 3) continue;
        std::vector<float> k(values(l)), v(values(l));
        cache.read(l, s, k.data(), v.data());
        const int32_t hd = config.layer_shape(l).head_dim;
        const auto ek = k_of(l, s), ev = v_of(l, s);
        for (size_t o = 0; o < ek.size(); o += size_t(hd)) {
          const std::vector<float> hk(ek.begin() + long(o), ek.begin() + long(o) + hd);
          const std::vector<float> hv(ev.begin() + long(o), ev.begin() + long(o) + hd);
          const auto bk = error_bound(type, hk), bv = error_bound(type, hv);
          for (size_t i = 0; i < size_t(hd); ++i) {
            ASSERT_LE(std::abs(k[o + i] - hk[i]), bk[i]) << "layer " << l << " slot " << s;
            ASSERT_LE(std::abs(v[o + i] - hv[i]), bv[i]) << "layer " << l << " slot " << s;
          }
        }
      }
  }
}

}  // namespace
}  // namespace vela
