#include "template/text.h"

#include <algorithm>

namespace vela::jinja {

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    int len = 0;
    char32_t cp = 0;
    if ((b0 & 0xE0) == 0xC0) {
      len = 2;
      cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3;
      cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4;
      cp = b0 & 0x07;
    }
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (b & 0x3F);
    }
    // Reject overlong forms, surrogates and values past U+10FFFF: they round-trip as bytes.
    if (ok) {
      static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
      if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) ok = false;
    }
    if (!ok) {
      out.push_back(0xDC00 + b0);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp >= 0xDC80 && cp <= 0xDCFF) {
    out.push_back(static_cast<char>(cp - 0xDC00));  // an undecodable byte, restored
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

size_t utf8_length(std::string_view s) {
  bool ascii = true;
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      ascii = false;
      break;
    }
  }
  return ascii ? s.size() : decode_utf8(s).size();
}

bool is_space(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_line_break(char32_t c) {
  return (c >= 0x0A && c <= 0x0D) || (c >= 0x1C && c <= 0x1E) || c == 0x85 || c == 0x2028 ||
         c == 0x2029;
}

bool is_digit(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return c == 0xB2 || c == 0xB3 || c == 0xB9 || (c >= 0x660 && c <= 0x669) ||
         (c >= 0x6F0 && c <= 0x6F9) || (c >= 0x966 && c <= 0x96F) || (c >= 0xFF10 && c <= 0xFF19);
}

namespace {

// Upper/lower pairs laid out as alternating code points (even upper, odd lower, or the
// reverse where `odd_upper`).
struct PairRange {
  char32_t first, last;
  bool odd_upper;
};
constexpr PairRange kPairRanges[] = {
    {0x100, 0x137, false},   {0x139, 0x148, true},    {0x14A, 0x177, false}, {0x179, 0x17E, true},
    {0x460, 0x481, false},   {0x48A, 0x4BF, false},   {0x4C1, 0x4CE, true},  {0x4D0, 0x52F, false},
    {0x1E00, 0x1E95, false}, {0x1EA0, 0x1EFF, false}, {0x3D8, 0x3EF, false},
};

// Offsets between a contiguous uppercase block and its lowercase block.
struct OffsetRange {
  char32_t upper_first, upper_last;
  int32_t delta;  // lower = upper + delta
};
constexpr OffsetRange kOffsetRanges[] = {
    {'A', 'Z', 32},       {0xC0, 0xD6, 32},       {0xD8, 0xDE, 32},     {0x391, 0x3A1, 32},
    {0x3A3, 0x3AB, 32},   {0x388, 0x38A, 37},     {0x410, 0x42F, 32},   {0x400, 0x40F, 80},
    {0xFF21, 0xFF3A, 32}, {0x531, 0x556, 48},     {0x386, 0x386, 38},   {0x38C, 0x38C, 64},
    {0x38E, 0x38F, 63},   {0x10A0, 0x10C5, 7264}, {0x178, 0x178, -121},
};

const PairRange* find_pair(char32_t c) {
  for (const auto& r : kPairRanges) {
    if (c >= r.first && c <= r.last) return &r;
  }
  return nullptr;
}

}  // namespace

char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c == 0x130) return 'i';
  for (const auto& r : kOffsetRanges) {
    if (c >= r.upper_first && c <= r.upper_last) return static_cast<char32_t>(c + r.delta);
  }
  if (const PairRange* p = find_pair(c)) {
    const bool upper = ((c & 1) == 1) == p->odd_upper;
    return upper ? c + 1 : c;
  }
  return c;
}

char32_t to_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (c == 0xB5) return 0x39C;
  if (c == 0xFF) return 0x178;
  if (c == 0x131) return 'I';
  if (c == 0x17F) return 'S';
  if (c == 0x3C2) return 0x3A3;
  for (const auto& r : kOffsetRanges) {
    const char32_t lo_first = static_cast<char32_t>(r.upper_first + r.delta);
    const char32_t lo_last = static_cast<char32_t>(r.upper_last + r.delta);
    if (c >= lo_first && c <= lo_last) return static_cast<char32_t>(c - r.delta);
  }
  if (const PairRange* p = find_pair(c)) {
    const bool upper = ((c & 1) == 1) == p->odd_upper;
    return upper ? c : c - 1;
  }
  return c;
}

bool is_upper(char32_t c) {
  return to_lower(c) != c || c == 0x130;
}
bool is_lower(char32_t c) {
  return to_upper(c) != c || c == 0xDF || c == 0x138 || c == 0x149;
}

bool is_alpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (is_upper(c) || is_lower(c)) return true;
  if (c == 0xAA || c == 0xBA) return true;
  if (c < 0x100) return false;  // Latin-1 punctuation and symbols
  if (is_space(c) || is_digit(c)) return false;
  // Punctuation and symbol blocks; everything else counts as a letter (CJK, kana, Hangul, ...).
  if (c >= 0x2000 && c <= 0x2BFF) return false;  // punctuation, arrows, math, shapes
  if (c >= 0x3000 && c <= 0x303F) return false;  // CJK punctuation
  if (c >= 0xFE30 && c <= 0xFE6F) return false;  // CJK compatibility forms
  if (c >= 0xFF00 && c <= 0xFF20) return false;  // fullwidth punctuation
  if (c >= 0xFF3B && c <= 0xFF40) return false;
  if (c >= 0xFF5B && c <= 0xFF65) return false;
  if (c >= 0x1F000 && c <= 0x1FAFF) return false;  // emoji and pictographs
  if (c >= 0xD800 && c <= 0xF8FF) return false;    // surrogates (raw bytes), private use
  if (c >= 0x300 && c <= 0x36F) return false;      // combining marks
  return true;
}

std::string str_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : decode_utf8(s)) {
    if (c == 0xDF) {
      out += "SS";  // the one common full (multi-character) mapping
    } else {
      append_utf8(out, to_upper(c));
    }
  }
  return out;
}

std::string str_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : decode_utf8(s)) {
    append_utf8(out, to_lower(c));
    if (c == 0x130) append_utf8(out, 0x307);  // İ -> i + combining dot above
  }
  return out;
}

std::string str_capitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool first = true;
  for (char32_t c : decode_utf8(s)) {
    append_utf8(out, first ? to_upper(c) : to_lower(c));
    first = false;
  }
  return out;
}

std::string str_title(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool prev_cased = false;
  for (char32_t c : decode_utf8(s)) {
    append_utf8(out, prev_cased ? to_lower(c) : to_upper(c));
    prev_cased = is_upper(c) || is_lower(c);
  }
  return out;
}

std::string str_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  const std::u32string cps = decode_utf8(s);
  std::u32string set;
  if (chars) set = decode_utf8(*chars);
  auto strip_it = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : is_space(c);
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip_it(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(cps[e - 1])) --e;
  }
  return encode_utf8(std::u32string_view(cps).substr(b, e - b));
}

std::vector<std::string> str_split(std::string_view s, const std::string* sep, long maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) return out;  // the caller reports "empty separator"
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<long>(out.size()) < maxsplit) {
      const size_t hit = s.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  const std::u32string cps = decode_utf8(s);
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && is_space(cps[i])) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<long>(out.size()) >= maxsplit) {
      out.push_back(encode_utf8(std::u32string_view(cps).substr(i)));  // remainder kept as is
      break;
    }
    const size_t start = i;
    while (i < cps.size() && !is_space(cps[i])) ++i;
    out.push_back(encode_utf8(std::u32string_view(cps).substr(start, i - start)));
  }
  return out;
}

std::vector<std::string> str_rsplit(std::string_view s, const std::string* sep, long maxsplit) {
  if (maxsplit < 0) return str_split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) return out;
    size_t end = s.size();
    while (static_cast<long>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  const std::u32string cps = decode_utf8(s);
  size_t i = cps.size();
  while (i > 0) {
    while (i > 0 && is_space(cps[i - 1])) --i;
    if (i == 0) break;
    if (static_cast<long>(out.size()) >= maxsplit) {
      out.push_back(encode_utf8(std::u32string_view(cps).substr(0, i)));  // remainder kept as is
      break;
    }
    const size_t end = i;
    while (i > 0 && !is_space(cps[i - 1])) --i;
    out.push_back(encode_utf8(std::u32string_view(cps).substr(i, end - i)));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> str_splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  const std::u32string cps = decode_utf8(s);
  size_t start = 0, i = 0;
  while (i < cps.size()) {
    if (!is_line_break(cps[i])) {
      ++i;
      continue;
    }
    size_t brk = 1;
    if (cps[i] == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') brk = 2;
    const size_t end = keepends ? i + brk : i;
    out.push_back(encode_utf8(std::u32string_view(cps).substr(start, end - start)));
    i += brk;
    start = i;
  }
  if (start < cps.size()) out.push_back(encode_utf8(std::u32string_view(cps).substr(start)));
  return out;
}

std::string str_replace(std::string_view s, std::string_view from, std::string_view to,
                        long count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` before every code point and at the end.
    const std::u32string cps = decode_utf8(s);
    long done = 0;
    for (char32_t c : cps) {
      if (count < 0 || done < count) {
        out.append(to);
        ++done;
      }
      append_utf8(out, c);
    }
    if (count < 0 || done < count) out.append(to);
    return out;
  }
  size_t pos = 0;
  long done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

size_t str_count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return utf8_length(s) + 1;
  size_t n = 0, pos = 0;
  while ((pos = s.find(sub, pos)) != std::string_view::npos) {
    ++n;
    pos += sub.size();
  }
  return n;
}

std::string utf8_substr(std::string_view s, long start, long stop) {
  const std::u32string cps = decode_utf8(s);
  const long n = static_cast<long>(cps.size());
  if (start < 0) start = std::max(0L, start + n);
  if (stop < 0) stop = std::max(0L, stop + n);
  start = std::min(start, n);
  stop = std::min(stop, n);
  if (stop <= start) return {};
  return encode_utf8(std::u32string_view(cps).substr(start, stop - start));
}

}  // namespace vela::jinja
