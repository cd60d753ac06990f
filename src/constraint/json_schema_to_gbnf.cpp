#include "constraint/json_schema_to_gbnf.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "constraint/json_key_complement.h"
#include "constraint/regex_length.h"
#include "constraint/regex_to_gbnf.h"

namespace vela::constraint {

namespace {

using json = nlohmann::ordered_json;

constexpr int kMaxSchemaDepth = 128;
constexpr uint64_t kMaxIntegerBound = 999'999'999'999'999;  // 15 digits
constexpr size_t kMaxEnumerated = 100'000;
constexpr uint64_t kMaxItemsBound = 10'000;

// Keywords that only annotate, or that the grammar already honours.
const std::set<std::string> kKnownKeywords = {"type",
                                              "properties",
                                              "required",
                                              "additionalProperties",
                                              "items",
                                              "prefixItems",
                                              "minItems",
                                              "maxItems",
                                              "enum",
                                              "const",
                                              "anyOf",
                                              "oneOf",
                                              "allOf",
                                              "$ref",
                                              "$defs",
                                              "definitions",
                                              "minLength",
                                              "maxLength",
                                              "pattern",
                                              "format",
                                              "minimum",
                                              "maximum",
                                              "exclusiveMinimum",
                                              "exclusiveMaximum",
                                              "title",
                                              "description",
                                              "default",
                                              "examples",
                                              "$schema",
                                              "$id",
                                              "$comment",
                                              "strict",
                                              "name",
                                              "nullable",
                                              "deprecated",
                                              "readOnly",
                                              "writeOnly",
                                              "contentEncoding",
                                              "contentMediaType",
                                              "unevaluatedProperties"};

// A value's compact JSON text, as the grammar spells it.
std::string json_text(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::strict);
}

std::string json_literal(const json& value) {
  return gbnf_literal(json_text(value));
}

// Decimal-digit patterns for the integers lo..hi (0 <= lo <= hi), as GBNF alternatives.
void same_length_range(const std::string& lo, const std::string& hi, std::string prefix,
                       std::vector<std::string>& out) {
  if (lo.empty()) {
    out.push_back(prefix.empty() ? "\"\"" : prefix);
    return;
  }
  const auto join = [](const std::string& a, const std::string& b) {
    return a.empty() ? b : a + " " + b;
  };
  if (lo[0] == hi[0]) {
    same_length_range(lo.substr(1), hi.substr(1), join(prefix, gbnf_literal(lo.substr(0, 1))), out);
    return;
  }
  const size_t rest = lo.size() - 1;
  const bool lo_full = lo.substr(1) == std::string(rest, '0');
  const bool hi_full = hi.substr(1) == std::string(rest, '9');
  char first_lo = lo[0], first_hi = hi[0];
  if (!lo_full) {
    same_length_range(lo.substr(1), std::string(rest, '9'),
                      join(prefix, gbnf_literal(lo.substr(0, 1))), out);
    ++first_lo;
  }
  if (!hi_full) --first_hi;
  if (first_lo <= first_hi) {
    std::string p = join(prefix, std::string("[") + first_lo + "-" + first_hi + "]");
    if (rest > 0) p += " [0-9]{" + std::to_string(rest) + "}";
    out.push_back(p);
  }
  if (!hi_full)
    same_length_range(std::string(rest, '0'), hi.substr(1),
                      join(prefix, gbnf_literal(hi.substr(0, 1))), out);
}

std::vector<std::string> digit_range(uint64_t lo, uint64_t hi) {
  std::vector<std::string> out;
  uint64_t start = lo;
  while (start <= hi) {
    const std::string s = std::to_string(start);
    uint64_t limit = 9;
    for (size_t i = 1; i < s.size(); ++i) limit = limit * 10 + 9;
    const uint64_t end = std::min(hi, limit);
    same_length_range(s, std::to_string(end), "", out);
    if (end == hi) break;
    start = end + 1;
  }
  return out;
}

class Converter {
 public:
  Converter(const json& root, const JsonGrammarOptions& options) : root_(root), options_(options) {}

  Result<std::string> run() {
    std::string root;
    if (!visit(root_, "#", 0, root)) return error_;
    std::string out = "root ::= " + root + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

  // The grammar of any JSON object, for json_object.
  std::string any_object() {
    std::string out = "root ::= " + base("object") + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  bool fail(const std::string& where, const std::string& what) {
    if (error_.message.empty())
      error_ = make_error("invalid JSON schema at " + where + ": " + what);
    return false;
  }

  std::string add_rule(const std::string& hint, const std::string& body) {
    std::string name;
    for (char c : hint) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    if (name.empty() || name.size() > 40) name = "r";
    name = "s-" + name + "-" + std::to_string(rules_.size());
    rules_[name] = body;
    return name;
  }

  // Shared primitive rules, created on first use.
  std::string base(const std::string& which) {
    const std::string name = "json-" + which;
    if (rules_.count(name)) return name;
    rules_[name] = "";  // reserve (recursive value/object/array)
    std::string body;
    if (which == "ws") {
      body = options_.compact_whitespace ? "\" \"?"
                                         : "[ \\t\\n]{0," + std::to_string(kLooseWhitespace) + "}";
    } else if (which == "char") {
      body = "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})";
    } else if (which == "string") {
      body = "\"\\\"\" " + base("char") + "* \"\\\"\"";
    } else if (which == "integer") {
      body = "\"-\"? (\"0\" | [1-9] [0-9]{0,15})";
    } else if (which == "number") {
      body = base("integer") + " (\".\" [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})?";
    } else if (which == "boolean") {
      body = "\"true\" | \"false\"";
    } else if (which == "null") {
      body = "\"null\"";
    } else if (which == "value") {
      body = base("object") + " | " + base("array") + " | " + base("string") + " | " +
             base("number") + " | " + base("boolean") + " | " + base("null");
    } else if (which == "object") {
      const std::string ws = base("ws");
      const std::string member = base("string") + " \":\" " + ws + " " + base("value");
      body =
          "\"{\" " + ws + " (" + member + " (\",\" " + ws + " " + member + ")*)? " + ws + " \"}\"";
    } else if (which == "array") {
      const std::string ws = base("ws");
      body = "\"[\" " + ws + " (" + base("value") + " (\",\" " + ws + " " + base("value") +
             ")*)? " + ws + " \"]\"";
    }
    rules_[name] = body;
    return name;
  }

  // A rule for one of `texts` (sorted, unique) as a prefix tree: one alternative per next byte,
  // so matching one of many values keeps one matcher stack per byte read instead of one per
  // value still possible. Each branching point is a rule of its own that the branch before it
  // ends with (a tail call), so neither the grammar's nesting nor the matcher's stacks grow
  // with the values' length. Built with an explicit work list: values can be long.
  std::string literal_tree(const std::vector<std::string>& texts) {
    struct Node {
      size_t b, e, d;  // texts[b, e) share their first d bytes
      std::string name;
    };
    const std::string root = add_rule("enum", "");
    std::vector<Node> work = {{0, texts.size(), 0, root}};
    while (!work.empty()) {
      const Node n = work.back();
      work.pop_back();
      std::string alts;
      const auto add = [&alts](const std::string& alt) {
        alts += (alts.empty() ? "" : " | ") + alt;
      };
      for (size_t i = n.b; i < n.e;) {
        if (texts[i].size() == n.d) {  // the shared prefix itself is a value (it sorts first)
          add("\"\"");
          ++i;
          continue;
        }
        size_t j = i + 1;
        while (j < n.e && texts[j][n.d] == texts[i][n.d]) ++j;
        const std::string& first = texts[i];
        const std::string& last = texts[j - 1];
        size_t l = n.d + 1;  // the group's common prefix (first and last bound it, being sorted)
        while (l < first.size() && l < last.size() && first[l] == last[l]) ++l;
        if (j - i == 1) {
          add(gbnf_literal(std::string_view(first).substr(n.d)));
        } else {
          const std::string child = add_rule("enum", "");
          add(gbnf_literal(std::string_view(first).substr(n.d, l - n.d)) + " " + child);
          work.push_back({i, j, l, child});
        }
        i = j;
      }
      rules_[n.name] = alts;
    }
    return root;
  }

  bool resolve(const std::string& ref, const std::string& where, const json*& target) {
    if (ref == "#") {
      target = &root_;
      return true;
    }
    if (ref.rfind("#/", 0) != 0) return fail(where, "only local $ref (\"#/...\") is supported");
    const json* node = &root_;
    size_t pos = 2;
    while (pos <= ref.size()) {
      size_t next = ref.find('/', pos);
      if (next == std::string::npos) next = ref.size();
      std::string part = ref.substr(pos, next - pos);
      for (size_t i; (i = part.find("~1")) != std::string::npos;) part.replace(i, 2, "/");
      for (size_t i; (i = part.find("~0")) != std::string::npos;) part.replace(i, 2, "~");
      if (!node->is_object() || !node->contains(part))
        return fail(where, "$ref '" + ref + "' does not resolve");
      node = &(*node)[part];
      pos = next + 1;
    }
    target = node;
    return true;
  }

  bool visit(const json& schema, const std::string& where, int depth, std::string& out) {
    if (depth > kMaxSchemaDepth) return fail(where, "nested too deeply");
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) return fail(where, "the schema 'false' accepts nothing");
      out = base("value");
      return true;
    }
    if (!schema.is_object()) return fail(where, "a schema must be an object or a boolean");
    for (const auto& [key, value] : schema.items()) {
      if (!kKnownKeywords.count(key))
        return fail(where, "the keyword '" + key + "' is not supported");
    }
    if (auto it = schema.find("$ref"); it != schema.end()) {
      if (!it->is_string()) return fail(where, "$ref must be a string");
      const std::string ref = it->get<std::string>();
      if (auto r = ref_rules_.find(ref); r != ref_rules_.end()) {
        out = r->second;
        return true;
      }
      const json* target = nullptr;
      if (!resolve(ref, where, target)) return false;
      const std::string name = add_rule("ref-" + ref.substr(ref.rfind('/') + 1), "\"\"");
      ref_rules_[ref] = name;
      std::string body;
      if (!visit(*target, ref, depth + 1, body)) return false;
      rules_[name] = body;
      out = name;
      return true;
    }
    if (auto it = schema.find("const"); it != schema.end()) {
      const std::string text = json_text(*it);
      if (text.size() > kMaxEnumBytes)
        return fail(where, "const is over " + std::to_string(kMaxEnumBytes) + " bytes");
      out = gbnf_literal(text);
      return true;
    }
    if (auto it = schema.find("enum"); it != schema.end()) {
      if (!it->is_array() || it->empty()) return fail(where, "enum must be a non-empty array");
      if (it->size() > kMaxEnumerated) return fail(where, "enum has too many values");
      std::vector<std::string> texts;
      size_t total = 0;
      for (const json& v : *it) {
        texts.push_back(json_text(v));
        total += texts.back().size();
        if (total > kMaxEnumBytes)
          return fail(where, "enum values total over " + std::to_string(kMaxEnumBytes) + " bytes");
      }
      std::sort(texts.begin(), texts.end());
      texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
      out = literal_tree(texts);
      return true;
    }
    // oneOf is compiled as anyOf: the union of the branches. "Exactly one" needs the union
    // minus the pairwise overlaps, and context-free languages are not closed under difference,
    // so a grammar cannot say it in general. The union is exact whenever no value satisfies two
    // branches: branches of different types, or objects whose discriminator property has
    // different const / enum values in each. Where branches overlap, a value of the overlap is
    // accepted although oneOf rejects it (as other structured-output engines do).
    for (const char* key : {"anyOf", "oneOf"}) {
      if (auto it = schema.find(key); it != schema.end()) {
        if (!it->is_array() || it->empty())
          return fail(where, std::string(key) + " must be a non-empty array");
        std::string body;
        for (size_t i = 0; i < it->size(); ++i) {
          // Sibling keywords apply to every branch (a common shorthand).
          json branch = (*it)[i];
          if (branch.is_object())
            for (const auto& [k, v] : schema.items())
              if (k != key && k != "$defs" && k != "definitions" && !branch.contains(k))
                branch[k] = v;
          std::string alt;
          if (!visit(branch, where + "/" + key + "/" + std::to_string(i), depth + 1, alt))
            return false;
          body += (body.empty() ? "" : " | ") + alt;
        }
        out = add_rule(key, body);
        return true;
      }
    }
    if (auto it = schema.find("allOf"); it != schema.end()) {
      if (!it->is_array() || it->size() != 1)
        return fail(where, "allOf is supported with exactly one schema");
      return visit((*it)[0], where + "/allOf/0", depth + 1, out);
    }
    std::vector<std::string> types;
    if (auto it = schema.find("type"); it != schema.end()) {
      if (it->is_string()) {
        types.push_back(it->get<std::string>());
      } else if (it->is_array() && !it->empty()) {
        for (const json& t : *it) {
          if (!t.is_string()) return fail(where, "type must be a string or an array of strings");
          types.push_back(t.get<std::string>());
        }
      } else {
        return fail(where, "type must be a string or an array of strings");
      }
    } else if (schema.contains("properties") || schema.contains("additionalProperties")) {
      types.push_back("object");
    } else if (schema.contains("items") || schema.contains("prefixItems")) {
      types.push_back("array");
    } else if (schema.contains("pattern") || schema.contains("format") ||
               schema.contains("minLength") || schema.contains("maxLength")) {
      types.push_back("string");
    } else if (schema.contains("minimum") || schema.contains("maximum")) {
      types.push_back("number");
    } else {
      out = base("value");
      return true;
    }
    if (auto it = schema.find("nullable"); it != schema.end()) {
      if (!it->is_boolean()) return fail(where, "nullable must be a boolean");
      if (it->get<bool>()) types.push_back("null");
    }
    std::string body;
    for (const std::string& t : types) {
      std::string alt;
      if (!typed(schema, t, where, depth, alt)) return false;
      body += (body.empty() ? "" : " | ") + alt;
    }
    out = types.size() == 1 ? body : add_rule("types", body);
    return true;
  }

  bool typed(const json& schema, const std::string& type, const std::string& where, int depth,
             std::string& out) {
    if (type == "string") return string_rule(schema, where, out);
    if (type == "integer" || type == "number") return number_rule(schema, type, where, out);
    if (type == "boolean" || type == "null") {
      out = base(type);
      return true;
    }
    if (type == "object") return object_rule(schema, where, depth, out);
    if (type == "array") return array_rule(schema, where, depth, out);
    return fail(where, "unknown type '" + type + "'");
  }

  bool count(const json& schema, const char* key, const std::string& where, uint64_t& value,
             bool& given) {
    given = false;
    auto it = schema.find(key);
    if (it == schema.end()) return true;
    if (!it->is_number_integer() || it->get<int64_t>() < 0)
      return fail(where, std::string(key) + " must be a non-negative integer");
    value = it->get<uint64_t>();
    given = true;
    return true;
  }

  bool string_rule(const json& schema, const std::string& where, std::string& out) {
    uint64_t min_len = 0, max_len = 0;
    bool has_min = false, has_max = false;
    if (!count(schema, "minLength", where, min_len, has_min)) return false;
    if (!count(schema, "maxLength", where, max_len, has_max)) return false;
    if (has_max && max_len < min_len) return fail(where, "maxLength is below minLength");
    if ((has_min && min_len > kMaxItemsBound) || (has_max && max_len > kMaxItemsBound))
      return fail(where, "string length bounds over " + std::to_string(kMaxItemsBound));
    // The content as a regex: the pattern, or the format's (unknown formats only annotate).
    std::string regex, regex_where = where + "/pattern";
    if (schema.contains("pattern")) {
      if (!schema["pattern"].is_string()) return fail(where, "pattern must be a string");
      regex = schema["pattern"].get<std::string>();
    } else if (schema.contains("format")) {
      if (!schema["format"].is_string()) return fail(where, "format must be a string");
      regex = format_regex(schema["format"].get<std::string>());
      regex_where = where + "/format";
    }
    std::string content;
    if (!regex.empty() && (has_min || has_max)) {
      // Both: the pattern's automaton times a length counter (lengths count decoded characters).
      const std::string prefix = "s-len-" + std::to_string(rules_.size());
      auto g = regex_with_length_to_gbnf(regex, /*json_string_content=*/true,
                                         {min_len, max_len, has_max}, prefix);
      if (!g) return fail(regex_where, g.message());
      for (auto& [name, body] : g->rules) rules_[name] = std::move(body);
      content = g->expression;
    } else if (!regex.empty()) {
      auto g = regex_to_gbnf(regex, /*json_string_content=*/true);
      if (!g) return fail(regex_where, g.message());
      content = *g;
    } else if (has_min || has_max) {
      content = base("char") + "{" + std::to_string(min_len) + "," +
                (has_max ? std::to_string(max_len) : "") + "}";
    } else {
      out = base("string");
      return true;
    }
    out = add_rule("string", "\"\\\"\" (" + content + ") \"\\\"\"");
    return true;
  }

  // The formats with a fixed shape, as regexes over the string's content ("" for others).
  static std::string format_regex(const std::string& format) {
    const std::string date = "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])";
    const std::string time =
        "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?"
        "(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
    const std::string octet = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
    if (format == "date") return date;
    if (format == "time") return time;
    if (format == "date-time") return date + "T" + time;
    if (format == "uuid") return "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
    if (format == "email")
      return "[a-zA-Z0-9._+-]{1,32}@[a-zA-Z0-9-]{1,32}(\\.[a-zA-Z0-9-]{1,16}){1,3}";
    if (format == "ipv4") return octet + "\\." + octet + "\\." + octet + "\\." + octet;
    return "";
  }

  bool bound(const json& schema, const char* key, const std::string& where, double& value,
             bool& given) {
    given = false;
    auto it = schema.find(key);
    if (it == schema.end()) return true;
    if (it->is_boolean()) return true;  // draft-4 exclusive flags are handled by the caller
    if (!it->is_number()) return fail(where, std::string(key) + " must be a number");
    value = it->get<double>();
    if (!std::isfinite(value)) return fail(where, std::string(key) + " must be finite");
    given = true;
    return true;
  }

  bool number_rule(const json& schema, const std::string& type, const std::string& where,
                   std::string& out) {
    double lo = 0, hi = 0, xlo = 0, xhi = 0;
    bool has_lo = false, has_hi = false, has_xlo = false, has_xhi = false;
    if (!bound(schema, "minimum", where, lo, has_lo) ||
        !bound(schema, "maximum", where, hi, has_hi) ||
        !bound(schema, "exclusiveMinimum", where, xlo, has_xlo) ||
        !bound(schema, "exclusiveMaximum", where, xhi, has_xhi))
      return false;
    if (!has_lo && !has_hi && !has_xlo && !has_xhi) {
      out = base(type);
      return true;
    }
    // Integer bounds [L, H] of the values the grammar produces.
    const double big = double(kMaxIntegerBound);
    double L = -big, H = big;
    if (has_lo) L = std::max(L, std::ceil(lo));
    if (has_xlo) L = std::max(L, std::floor(xlo) + 1);
    if (has_hi) H = std::min(H, std::floor(hi));
    if (has_xhi) H = std::min(H, std::ceil(xhi) - 1);
    // draft-4 boolean exclusive flags
    if (schema.value("exclusiveMinimum", json()).is_boolean() && schema["exclusiveMinimum"] &&
        has_lo)
      L = std::max(L, std::floor(lo) + 1);
    if (schema.value("exclusiveMaximum", json()).is_boolean() && schema["exclusiveMaximum"] &&
        has_hi)
      H = std::min(H, std::ceil(hi) - 1);
    if (L < -big || H > big || L > big || H < -big)
      return fail(where, "numeric bounds beyond 15 digits are not supported");
    if (L > H) return fail(where, "no integer satisfies the bounds");
    const int64_t lo_i = int64_t(L), hi_i = int64_t(H);
    std::vector<std::string> alts;
    if (hi_i >= 0)
      for (const std::string& p : digit_range(uint64_t(std::max<int64_t>(lo_i, 0)), uint64_t(hi_i)))
        alts.push_back(p);
    if (lo_i < 0)
      for (const std::string& p :
           digit_range(uint64_t(std::max<int64_t>(-hi_i, 1)), uint64_t(-lo_i)))
        alts.push_back("\"-\" " + p);
    std::string body;
    for (const std::string& a : alts)
      body += (body.empty() ? "" : " | ") + std::string("(") + a + ")";
    // Decimals: x.f with x in [max(L, 0), H - 1] lies in [L, H), and -x.f with x in
    // [max(-H, 0), -L - 1] in (L, H] (x.f < x + 1 whatever the digits f).
    const auto decimals = [&](int64_t from, int64_t to, const char* sign) {
      if (type != "number" || to < from) return;
      std::string whole;
      for (const std::string& p : digit_range(uint64_t(from), uint64_t(to)))
        whole += (whole.empty() ? "" : " | ") + std::string("(") + p + ")";
      body += std::string(" | ") + sign + "(" + whole + ") \".\" [0-9]{1,15}";
    };
    if (hi_i >= 1) decimals(std::max<int64_t>(lo_i, 0), hi_i - 1, "");
    if (lo_i <= -1) decimals(std::max<int64_t>(-hi_i, 0), -lo_i - 1, "\"-\" ");
    out = add_rule(type + "-range", body);
    return true;
  }

  bool object_rule(const json& schema, const std::string& where, int depth, std::string& out) {
    const std::string ws = base("ws");
    std::vector<std::pair<std::string, bool>> members;  // grammar of "key": value, required
    std::vector<std::string> required_order;            // as listed, without repeats
    std::set<std::string> required;
    if (auto it = schema.find("required"); it != schema.end()) {
      if (!it->is_array()) return fail(where, "required must be an array of strings");
      for (const json& r : *it) {
        if (!r.is_string()) return fail(where, "required must be an array of strings");
        if (required.insert(r.get<std::string>()).second) required_order.push_back(r);
      }
    }
    std::vector<std::string> named;  // the keys members are written for
    if (auto it = schema.find("properties"); it != schema.end()) {
      if (!it->is_object()) return fail(where, "properties must be an object");
      for (const auto& [key, sub] : it->items()) {
        std::string value;
        if (!visit(sub, where + "/properties/" + key, depth + 1, value)) return false;
        members.push_back(
            {json_literal(json(key)) + " \":\" " + ws + " " + value, required.count(key) > 0});
        named.push_back(key);
      }
    }
    std::string extra_value;  // grammar of an additional member's value; empty: none allowed
    if (auto it = schema.find("additionalProperties");
        it != schema.end() && !(it->is_boolean() && !it->get<bool>())) {
      if (!visit(*it, where + "/additionalProperties", depth + 1, extra_value)) return false;
    } else if (!schema.contains("properties") && it == schema.end()) {
      extra_value = base("value");
    }
    // Required keys without a property schema take the additionalProperties one, after the
    // properties in the order `required` lists them.
    const std::set<std::string> with_schema(named.begin(), named.end());
    for (const std::string& r : required_order) {
      if (with_schema.count(r)) continue;
      if (extra_value.empty())
        return fail(where, "required property '" + r +
                               "' is not in properties and no additional properties are allowed");
      members.push_back({json_literal(json(r)) + " \":\" " + ws + " " + extra_value, true});
      named.push_back(r);
    }
    // Further members use keys other than the named ones (which their own schemas govern).
    std::string extra;  // grammar of one additional member
    if (!extra_value.empty()) {
      std::string key = base("string");
      if (!named.empty()) {
        GbnfRules other = json_key_other_than(named, "s-key-" + std::to_string(rules_.size()));
        for (auto& [name, body] : other.rules) rules_[name] = std::move(body);
        key = other.expression;
      }
      extra = key + " \":\" " + ws + " " + extra_value;
    }
    // tail(i, comma): members i.. in order; `comma` when a member was already written. Built
    // depth first with an explicit stack, children before parents as a recursive descent would
    // add them: an object can have tens of thousands of members, too deep to recurse.
    std::map<std::pair<size_t, bool>, std::string> tails;
    std::vector<std::pair<size_t, bool>> pending = {{0, false}};
    while (!pending.empty()) {
      const auto [i, comma] = pending.back();
      if (tails.count({i, comma})) {
        pending.pop_back();
        continue;
      }
      std::string body;
      if (i == members.size()) {
        pending.pop_back();
        if (extra.empty()) {
          tails[{i, comma}] = "\"\"";
          continue;
        }
        const std::string more = "(\",\" " + ws + " " + extra + ")*";
        body = comma ? more : "(" + extra + " " + more + ")?";
        tails[{i, comma}] = add_rule("members", body);
        continue;
      }
      const auto with_next = tails.find({i + 1, true});
      if (with_next == tails.end()) {
        pending.push_back({i + 1, true});
        continue;
      }
      const bool required_member = members[i].second;
      const auto without = tails.find({i + 1, comma});
      if (!required_member && without == tails.end()) {
        pending.push_back({i + 1, comma});
        continue;
      }
      pending.pop_back();
      const std::string sep = comma ? "\",\" " + ws + " " : "";
      const std::string with = sep + members[i].first + " " + with_next->second;
      body = required_member ? with : with + " | " + without->second;
      tails[{i, comma}] = add_rule("members", body);
    }
    out = add_rule("object", "\"{\" " + ws + " " + tails.at({0, false}) + " " + ws + " \"}\"");
    return true;
  }

  bool array_rule(const json& schema, const std::string& where, int depth, std::string& out) {
    const std::string ws = base("ws");
    uint64_t min_items = 0, max_items = 0;
    bool has_min = false, has_max = false;
    if (!count(schema, "minItems", where, min_items, has_min)) return false;
    if (!count(schema, "maxItems", where, max_items, has_max)) return false;
    if (has_max && max_items < min_items) return fail(where, "maxItems is below minItems");
    if (min_items > kMaxItemsBound || (has_max && max_items > kMaxItemsBound))
      return fail(where, "item count bounds over " + std::to_string(kMaxItemsBound));
    std::vector<std::string> prefix;
    if (auto it = schema.find("prefixItems"); it != schema.end()) {
      if (!it->is_array()) return fail(where, "prefixItems must be an array");
      for (size_t i = 0; i < it->size(); ++i) {
        std::string item;
        if (!visit((*it)[i], where + "/prefixItems/" + std::to_string(i), depth + 1, item))
          return false;
        prefix.push_back(item);
      }
    }
    std::string item;
    bool more_allowed = true;
    if (auto it = schema.find("items"); it != schema.end()) {
      if (it->is_boolean() && !it->get<bool>()) {
        more_allowed = false;
      } else if (!visit(*it, where + "/items", depth + 1, item)) {
        return false;
      }
    } else {
      item = prefix.empty() ? base("value") : "";
      more_allowed = prefix.empty();
    }
    if (!prefix.empty()) {
      // Prefix items in order (the first min(minItems, n) required), then further items.
      if (min_items > prefix.size() && !more_allowed)
        return fail(where, "minItems exceeds prefixItems and items is false");
      std::string body = "\"\"";
      // Build from the back: after_k = ("," item_k after_{k+1})? for optional ones.
      std::string rest = "\"\"";
      if (more_allowed && !item.empty()) {
        const uint64_t extra_min = min_items > prefix.size() ? min_items - prefix.size() : 0;
        std::string rep = "(\",\" " + ws + " " + item + ")";
        rest = rep + "{" + std::to_string(extra_min) + "," +
               (has_max ? std::to_string(max_items > prefix.size() ? max_items - prefix.size() : 0)
                        : "") +
               "}";
      }
      const size_t n = has_max ? std::min<size_t>(prefix.size(), max_items) : prefix.size();
      for (size_t k = n; k-- > 0;) {
        const std::string sep = k == 0 ? "" : "\",\" " + ws + " ";
        const std::string seq = sep + prefix[k] + " " + rest;
        rest = add_rule("prefix", k < min_items ? seq : "(" + seq + ")?");
      }
      body = rest;
      if (n == 0) body = "\"\"";
      out = add_rule("array", "\"[\" " + ws + " " + body + " " + ws + " \"]\"");
      return true;
    }
    if (!more_allowed) {
      if (min_items > 0) return fail(where, "minItems > 0 with items false");
      out = add_rule("array", "\"[\" " + ws + " \"]\"");
      return true;
    }
    std::string body;
    const std::string rep = "(\",\" " + ws + " " + item + ")";
    if (has_max && max_items == 0) {
      body = "\"\"";
    } else {
      const std::string tail_count = "{" + std::to_string(min_items > 0 ? min_items - 1 : 0) + "," +
                                     (has_max ? std::to_string(max_items - 1) : "") + "}";
      const std::string list = item + " " + rep + tail_count;
      body = min_items > 0 ? list : "(" + list + ")?";
    }
    out = add_rule("array", "\"[\" " + ws + " " + body + " " + ws + " \"]\"");
    return true;
  }

  const json& root_;
  JsonGrammarOptions options_;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> ref_rules_;
  Error error_;
};

}  // namespace

Result<std::string> json_schema_to_gbnf(const json& schema, const JsonGrammarOptions& options) {
  return Converter(schema, options).run();
}

std::string json_object_gbnf(const JsonGrammarOptions& options) {
  static const json kEmpty = json::object();
  return Converter(kEmpty, options).any_object();
}

}  // namespace vela::constraint
