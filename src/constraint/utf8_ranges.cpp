#include "constraint/utf8_ranges.h"

#include <algorithm>

namespace vela::constraint {

namespace {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

int encoded_length(uint32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

void split(uint32_t lo, uint32_t hi, std::vector<std::vector<ByteRange>>& out) {
  // Same encoded length on both ends.
  for (uint32_t limit : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= limit && hi > limit) {
      split(lo, limit, out);
      split(limit + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out.push_back({ByteRange{uint8_t(lo), uint8_t(hi)}});
    return;
  }
  // Split until every continuation byte spans a full or aligned block.
  const int n = encoded_length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t(1) << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::vector<uint8_t> a, b;
  append_utf8(lo, a);
  append_utf8(hi, b);
  std::vector<ByteRange> seq;
  for (size_t i = 0; i < a.size(); ++i) seq.push_back(ByteRange{a[i], b[i]});
  out.push_back(std::move(seq));
}

}  // namespace

void append_utf8(uint32_t cp, std::vector<uint8_t>& out) {
  if (cp < 0x80) {
    out.push_back(uint8_t(cp));
  } else if (cp < 0x800) {
    out.push_back(uint8_t(0xC0 | (cp >> 6)));
    out.push_back(uint8_t(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(uint8_t(0xE0 | (cp >> 12)));
    out.push_back(uint8_t(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(uint8_t(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(uint8_t(0xF0 | (cp >> 18)));
    out.push_back(uint8_t(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(uint8_t(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(uint8_t(0x80 | (cp & 0x3F)));
  }
}

std::vector<CodepointRange> normalize_ranges(std::vector<CodepointRange> ranges) {
  for (auto& r : ranges) {
    if (r.first > r.second) std::swap(r.first, r.second);
    r.second = std::min(r.second, kMaxCodepoint);
  }
  std::erase_if(ranges, [](const CodepointRange& r) { return r.first > kMaxCodepoint; });
  std::sort(ranges.begin(), ranges.end());
  std::vector<CodepointRange> out;
  for (const auto& r : ranges) {
    if (!out.empty() && r.first <= out.back().second + 1)
      out.back().second = std::max(out.back().second, r.second);
    else
      out.push_back(r);
  }
  return out;
}

std::vector<CodepointRange> complement_ranges(const std::vector<CodepointRange>& ranges) {
  std::vector<CodepointRange> out;
  uint32_t next = 0;
  for (const auto& r : ranges) {
    if (r.first > next) out.push_back({next, r.first - 1});
    next = r.second + 1;
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return out;
}

std::vector<std::vector<ByteRange>> utf8_sequences(const std::vector<CodepointRange>& ranges) {
  std::vector<std::vector<ByteRange>> out;
  for (auto [lo, hi] : normalize_ranges(ranges)) {
    // Surrogates are not characters: cut them out.
    if (lo <= 0xDFFF && hi >= 0xD800) {
      if (lo < 0xD800) split(lo, 0xD7FF, out);
      if (hi > 0xDFFF) split(0xE000, hi, out);
      continue;
    }
    split(lo, hi, out);
  }
  return out;
}

uint32_t next_code_point(std::string_view s, size_t& pos) {
  const unsigned char c = static_cast<unsigned char>(s[pos]);
  const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (n == 1 || pos + size_t(n) > s.size()) {
    ++pos;
    return c;
  }
  uint32_t cp = c & (0x7F >> n);
  for (int i = 1; i < n; ++i)
    cp = (cp << 6) | (static_cast<unsigned char>(s[pos + size_t(i)]) & 0x3F);
  pos += size_t(n);
  return cp;
}

}  // namespace vela::constraint
