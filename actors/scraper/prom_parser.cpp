// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/scraper/prom_parser.hpp"

#include <charconv>
#include <cmath>
#include <limits>

namespace kvrelay {

const char* to_string(metric_type t) {
  switch (t) {
    case metric_type::untyped: return "untyped";
    case metric_type::counter: return "counter";
    case metric_type::gauge: return "gauge";
    case metric_type::histogram: return "histogram";
    case metric_type::summary: return "summary";
    case metric_type::gaugehistogram: return "gaugehistogram";
    case metric_type::stateset: return "stateset";
    case metric_type::info: return "info";
  }
  return "untyped";
}

const std::string* prom_sample::label(std::string_view name) const {
  for (const auto& l : labels)
    if (l.name == name) return &l.value;
  return nullptr;
}

const metric_family* prom_exposition::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &families_[it->second];
}

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t'; }
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_label_start(char c) { return is_name_start(c) && c != ':'; }
bool is_label_char(char c) { return is_name_char(c) && c != ':'; }

// Suffixes a sample name may carry on top of its family's name, by family type. Anything else is
// a family of its own (that is how text 0.0.4 writes `X_total` with its own TYPE line).
bool suffix_allowed(metric_type t, std::string_view s) {
  switch (t) {
    case metric_type::counter: return s == "_total" || s == "_created";
    case metric_type::histogram:
      return s == "_bucket" || s == "_sum" || s == "_count" || s == "_created";
    case metric_type::summary: return s == "_sum" || s == "_count" || s == "_created";
    case metric_type::gaugehistogram: return s == "_bucket" || s == "_gsum" || s == "_gcount";
    case metric_type::info: return s == "_info";
    default: return false;
  }
}

constexpr std::string_view kSuffixes[] = {"_total", "_created", "_bucket", "_sum",
                                          "_count", "_gsum",    "_gcount", "_info"};

bool parse_type(std::string_view w, metric_type* out) {
  if (w == "counter") *out = metric_type::counter;
  else if (w == "gauge") *out = metric_type::gauge;
  else if (w == "histogram") *out = metric_type::histogram;
  else if (w == "summary") *out = metric_type::summary;
  else if (w == "untyped" || w == "unknown") *out = metric_type::untyped;
  else if (w == "gaugehistogram") *out = metric_type::gaugehistogram;
  else if (w == "stateset") *out = metric_type::stateset;
  else if (w == "info") *out = metric_type::info;
  else return false;
  return true;
}

// Go's ParseFloat and OpenMetrics both spell infinities with a sign ("+Inf"); from_chars takes no
// leading '+', so it is peeled here. The whole token must be consumed.
bool parse_number(std::string_view tok, double* out) {
  if (tok.empty()) return false;
  bool plus = tok.front() == '+';
  if (plus) {
    tok.remove_prefix(1);
    if (tok.empty() || tok.front() == '-' || tok.front() == '+') return false;
  }
  double v = 0;
  auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  if (ec == std::errc::result_out_of_range) {
    // Out-of-range literals saturate like strtod does rather than failing the whole scrape.
    v = tok.front() == '-' ? -std::numeric_limits<double>::infinity()
                           : std::numeric_limits<double>::infinity();
    // from_chars reports range errors for tiny values too; those are 0 in effect.
    if (tok.find_first_of("eE") != std::string_view::npos) {
      auto e = tok.substr(tok.find_first_of("eE") + 1);
      if (!e.empty() && e.front() == '-') v = 0.0;
    }
  } else if (ec != std::errc()) {
    return false;
  }
  if (p != tok.data() + tok.size()) return false;
  *out = v;
  return true;
}

}  // namespace

class prom_parser_impl {
 public:
  explicit prom_parser_impl(prom_exposition& out) : out_(out) {}

  bool run(std::string_view body, std::string* err) {
    if (body.size() > kMaxPrometheusBody) {
      *err = "body of " + std::to_string(body.size()) + " bytes exceeds the " +
             std::to_string(kMaxPrometheusBody) + "-byte limit";
      return false;
    }
    std::size_t pos = 0;
    while (pos < body.size()) {
      ++line_no_;
      std::size_t nl = body.find('\n', pos);
      std::size_t end = nl == std::string_view::npos ? body.size() : nl;
      std::string_view line = body.substr(pos, end - pos);
      pos = nl == std::string_view::npos ? body.size() : nl + 1;
      if (out_.eof_seen_) {
        if (line.empty() && pos >= body.size()) break;
        return fail(err, "content after # EOF");
      }
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!parse_line(line)) {
        *err = "line " + std::to_string(line_no_) + ": " + why_;
        return false;
      }
    }
    return true;
  }

 private:
  bool fail(std::string* err, std::string what) {
    *err = "line " + std::to_string(line_no_) + ": " + what;
    return false;
  }
  bool bad(std::string what) {
    why_ = std::move(what);
    return false;
  }

  static void skip_blanks(std::string_view l, std::size_t* i) {
    while (*i < l.size() && is_blank(l[*i])) ++*i;
  }
  static std::string_view next_token(std::string_view l, std::size_t* i) {
    skip_blanks(l, i);
    std::size_t b = *i;
    while (*i < l.size() && !is_blank(l[*i])) ++*i;
    return l.substr(b, *i - b);
  }
  static bool valid_metric_name(std::string_view n) {
    if (n.empty() || !is_name_start(n[0])) return false;
    for (char c : n)
      if (!is_name_char(c)) return false;
    return true;
  }

  bool parse_line(std::string_view l) {
    std::size_t i = 0;
    skip_blanks(l, &i);
    if (i == l.size()) return true;  // blank line
    if (l[i] == '#') return parse_comment(l, i + 1);
    return parse_sample(l, i);
  }

  bool parse_comment(std::string_view l, std::size_t i) {
    if (l.substr(i) == " EOF") {
      out_.eof_seen_ = true;
      return true;
    }
    std::size_t j = i;
    skip_blanks(l, &j);
    if (j == i) return true;  // "#foo" is a plain comment
    std::size_t k = j;
    std::string_view kw = next_token(l, &k);
    if (kw != "HELP" && kw != "TYPE" && kw != "UNIT") return true;
    std::string_view name = next_token(l, &k);
    if (!valid_metric_name(name)) return bad("invalid metric name in " + std::string(kw) + " line");
    if (kw == "UNIT") return true;
    if (kw == "HELP") {
      metric_family* f = family_for_meta(name);
      if (helped_.size() <= index_of(f)) helped_.resize(out_.families_.size(), false);
      if (helped_[index_of(f)]) return bad("second HELP line for " + std::string(name));
      helped_[index_of(f)] = true;
      return true;  // the docstring is not needed by kvrelay
    }
    std::string_view type_word = next_token(l, &k);
    skip_blanks(l, &k);
    if (k != l.size()) return bad("trailing text in TYPE line");
    metric_type t;
    if (!parse_type(type_word, &t)) return bad("unknown metric type '" + std::string(type_word) + "'");
    metric_family* f = family_for_meta(name);
    if (f->declared) return bad("second TYPE line for " + std::string(name));
    if (!f->samples.empty()) return bad("TYPE line for " + std::string(name) + " after its samples");
    f->type = t;
    f->declared = true;
    return true;
  }

  std::size_t index_of(const metric_family* f) const {
    return static_cast<std::size_t>(f - out_.families_.data());
  }

  metric_family* family_for_meta(std::string_view name) {
    auto it = out_.by_name_.find(std::string(name));
    if (it != out_.by_name_.end()) return &out_.families_[it->second];
    return create(name);
  }

  metric_family* create(std::string_view name) {
    out_.by_name_.emplace(std::string(name), out_.families_.size());
    out_.families_.push_back(metric_family{std::string(name), metric_type::untyped, false, {}});
    current_ = out_.families_.size() - 1;
    return &out_.families_.back();
  }

  // Finds the family a sample belongs to, and the suffix it carries. The current family is tried
  // first because samples follow their TYPE line: most lines skip the hash lookup.
  metric_family* family_for_sample(std::string_view name, std::string_view* suffix) {
    if (current_ < out_.families_.size()) {
      metric_family& f = out_.families_[current_];
      if (name.size() >= f.name.size() && name.compare(0, f.name.size(), f.name) == 0) {
        std::string_view rest = name.substr(f.name.size());
        if (rest.empty() || suffix_allowed(f.type, rest)) {
          *suffix = rest;
          return &f;
        }
      }
    }
    std::string key(name);
    auto it = out_.by_name_.find(key);
    if (it != out_.by_name_.end()) {
      current_ = it->second;
      *suffix = {};
      return &out_.families_[it->second];
    }
    for (std::string_view s : kSuffixes) {
      if (name.size() <= s.size() || name.substr(name.size() - s.size()) != s) continue;
      key.assign(name.substr(0, name.size() - s.size()));
      auto b = out_.by_name_.find(key);
      if (b != out_.by_name_.end() && suffix_allowed(out_.families_[b->second].type, s)) {
        current_ = b->second;
        *suffix = s;
        return &out_.families_[b->second];
      }
    }
    *suffix = {};
    return create(name);
  }

  // Parses `{name="value",...}` starting at l[*i] == '{'. A trailing comma is allowed (text 0.0.4).
  bool parse_labels(std::string_view l, std::size_t* i, std::vector<prom_label>* labels) {
    ++*i;
    for (;;) {
      skip_blanks(l, i);
      if (*i >= l.size()) return bad("unterminated label set");
      if (l[*i] == '}') {
        ++*i;
        return true;
      }
      std::size_t b = *i;
      if (!is_label_start(l[*i])) return bad("invalid label name");
      while (*i < l.size() && is_label_char(l[*i])) ++*i;
      std::string_view lname = l.substr(b, *i - b);
      skip_blanks(l, i);
      if (*i >= l.size() || l[*i] != '=') return bad("expected '=' after label name");
      ++*i;
      skip_blanks(l, i);
      if (*i >= l.size() || l[*i] != '"') return bad("expected '\"' to open label value");
      ++*i;
      std::string value;
      // Fast path: most values have no escapes, so copy them in one go.
      std::size_t stop = *i;
      while (stop < l.size() && l[stop] != '"' && l[stop] != '\\') ++stop;
      if (stop < l.size() && l[stop] == '"') {
        value.assign(l.substr(*i, stop - *i));
        *i = stop;
      }
      for (;;) {
        if (*i >= l.size()) return bad("unterminated label value");
        char c = l[(*i)++];
        if (c == '"') break;
        if (c != '\\') {
          value.push_back(c);
          continue;
        }
        if (*i >= l.size()) return bad("unterminated escape in label value");
        char e = l[(*i)++];
        if (e == '\\') value.push_back('\\');
        else if (e == '"') value.push_back('"');
        else if (e == 'n') value.push_back('\n');
        else return bad("invalid escape sequence in label value");
      }
      for (const auto& existing : *labels)
        if (existing.name == lname) return bad("duplicate label " + std::string(lname));
      labels->push_back(prom_label{std::string(lname), std::move(value)});
      skip_blanks(l, i);
      if (*i < l.size() && l[*i] == ',') {
        ++*i;
        continue;
      }
      if (*i < l.size() && l[*i] == '}') {
        ++*i;
        return true;
      }
      return bad("expected ',' or '}' in label set");
    }
  }

  bool parse_sample(std::string_view l, std::size_t i) {
    std::size_t b = i;
    if (!is_name_start(l[i])) return bad("invalid metric name");
    while (i < l.size() && is_name_char(l[i])) ++i;
    std::string_view name = l.substr(b, i - b);
    prom_sample s;
    std::size_t after_name = i;
    skip_blanks(l, &i);
    if (i < l.size() && l[i] == '{') {
      scratch_.clear();
      if (!parse_labels(l, &i, &scratch_)) return false;
      // One exact-size allocation per sample instead of the vector's growth steps.
      s.labels.reserve(scratch_.size());
      for (auto& lab : scratch_) s.labels.push_back(std::move(lab));
      if (i < l.size() && !is_blank(l[i])) return bad("expected blank before value");
    } else if (i == after_name && i < l.size()) {
      return bad("invalid character in metric name");
    }
    std::string_view tok = next_token(l, &i);
    if (tok.empty()) return bad("missing value");
    if (!parse_number(tok, &s.value)) return bad("invalid value '" + std::string(tok) + "'");
    tok = next_token(l, &i);
    if (!tok.empty() && tok != "#") {
      if (!parse_number(tok, &s.timestamp) || !std::isfinite(s.timestamp))
        return bad("invalid timestamp '" + std::string(tok) + "'");
      s.has_timestamp = true;
      tok = next_token(l, &i);
    }
    if (tok == "#") {
      if (!parse_exemplar(l, &i)) return false;
    } else if (!tok.empty()) {
      return bad("trailing text after sample");
    }
    std::string_view suffix;
    metric_family* f = family_for_sample(name, &suffix);
    s.suffix.assign(suffix);
    f->samples.push_back(std::move(s));
    return true;
  }

  // OpenMetrics exemplar: `# {labels} value [timestamp]`. Validated, then discarded.
  bool parse_exemplar(std::string_view l, std::size_t* i) {
    skip_blanks(l, i);
    if (*i >= l.size() || l[*i] != '{') return bad("invalid exemplar");
    std::vector<prom_label> labels;
    if (!parse_labels(l, i, &labels)) return false;
    double v;
    std::string_view tok = next_token(l, i);
    if (!parse_number(tok, &v)) return bad("invalid exemplar value");
    tok = next_token(l, i);
    if (!tok.empty() && !parse_number(tok, &v)) return bad("invalid exemplar timestamp");
    skip_blanks(l, i);
    if (*i != l.size()) return bad("trailing text after exemplar");
    return true;
  }

  prom_exposition& out_;
  std::size_t line_no_ = 0;
  std::size_t current_ = static_cast<std::size_t>(-1);
  std::vector<bool> helped_;
  std::vector<prom_label> scratch_;  // reused across lines
  std::string why_;
};

prom_parse_result parse_prometheus(std::string_view body) {
  prom_parse_result r;
  prom_parser_impl p(r.exposition);
  r.ok = p.run(body, &r.error);
  if (!r.ok) r.exposition = prom_exposition{};
  return r;
}

}  // namespace kvrelay
