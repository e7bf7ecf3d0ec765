/*
 * A strict, minimal JSON reader for the p2p_perftest test: objects, arrays,
 * strings (simple escapes), numbers, true/false/null. Enough to prove that
 * --json output parses and to read its fields; not a general library.
 */
#ifndef UCXP2P_TEST_PERFTEST_JSON_MINI_H
#define UCXP2P_TEST_PERFTEST_JSON_MINI_H

#include <cctype>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace jsonmini {

struct Value {
    enum Kind { NUL, BOOL, NUMBER, STRING, ARRAY, OBJECT } kind = NUL;
    bool b = false;
    double num = 0;
    std::string str;
    std::vector<Value> arr;
    std::map<std::string, Value> obj;

    bool has(const std::string &k) const {
        return kind == OBJECT && obj.count(k) != 0;
    }
    const Value &at(const std::string &k) const {
        static const Value none;
        auto it = obj.find(k);
        return it == obj.end() ? none : it->second;
    }
};

class Parser {
public:
    explicit Parser(const std::string &text) : s_(text) {}

    /** Parse the whole text; false (with error()) on any syntax error or
     *  trailing garbage. */
    bool parse(Value *out) {
        if (!value(out)) {
            return false;
        }
        ws();
        if (i_ != s_.size()) {
            return fail("trailing characters");
        }
        return true;
    }
    const std::string &error() const { return err_; }

private:
    bool fail(const char *why) {
        if (err_.empty()) {
            err_ = std::string(why) + " at offset " + std::to_string(i_);
        }
        return false;
    }
    void ws() {
        while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(
                                     s_[i_]))) {
            ++i_;
        }
    }
    bool lit(const char *word) {
        size_t n = std::string(word).size();
        if (s_.compare(i_, n, word) != 0) {
            return fail("bad literal");
        }
        i_ += n;
        return true;
    }
    bool string(std::string *out) {
        if (s_[i_] != '"') {
            return fail("expected string");
        }
        ++i_;
        while (i_ < s_.size() && s_[i_] != '"') {
            char c = s_[i_++];
            if (static_cast<unsigned char>(c) < 0x20) {
                return fail("control character in string");
            }
            if (c == '\\') {
                if (i_ >= s_.size()) {
                    return fail("bad escape");
                }
                char e = s_[i_++];
                switch (e) {
                case '"': case '\\': case '/': *out += e; break;
                case 'n': *out += '\n'; break;
                case 't': *out += '\t'; break;
                case 'u':
                    if (i_ + 4 > s_.size()) {
                        return fail("bad \\u escape");
                    }
                    *out += static_cast<char>(
                        std::strtol(s_.substr(i_, 4).c_str(), nullptr, 16));
                    i_ += 4;
                    break;
                default: return fail("bad escape");
                }
            } else {
                *out += c;
            }
        }
        if (i_ >= s_.size()) {
            return fail("unterminated string");
        }
        ++i_;
        return true;
    }
    bool number(Value *v) {
        const char *start = s_.c_str() + i_;
        char *end = nullptr;
        v->num = std::strtod(start, &end);
        if (end == start || !(std::isdigit(static_cast<unsigned char>(
                                  *start)) || *start == '-')) {
            return fail("bad number");
        }
        v->kind = Value::NUMBER;
        i_ += static_cast<size_t>(end - start);
        return true;
    }
    bool value(Value *v) {
        ws();
        if (i_ >= s_.size()) {
            return fail("unexpected end");
        }
        char c = s_[i_];
        if (c == '{') {
            v->kind = Value::OBJECT;
            ++i_;
            ws();
            if (i_ < s_.size() && s_[i_] == '}') {
                ++i_;
                return true;
            }
            for (;;) {
                ws();
                std::string key;
                if (i_ >= s_.size() || !string(&key)) {
                    return fail("expected key");
                }
                ws();
                if (i_ >= s_.size() || s_[i_++] != ':') {
                    return fail("expected ':'");
                }
                if (!value(&v->obj[key])) {
                    return false;
                }
                ws();
                if (i_ < s_.size() && s_[i_] == ',') {
                    ++i_;
                    continue;
                }
                if (i_ < s_.size() && s_[i_] == '}') {
                    ++i_;
                    return true;
                }
                return fail("expected ',' or '}'");
            }
        }
        if (c == '[') {
            v->kind = Value::ARRAY;
            ++i_;
            ws();
            if (i_ < s_.size() && s_[i_] == ']') {
                ++i_;
                return true;
            }
            for (;;) {
                v->arr.emplace_back();
                if (!value(&v->arr.back())) {
                    return false;
                }
                ws();
                if (i_ < s_.size() && s_[i_] == ',') {
                    ++i_;
                    continue;
                }
                if (i_ < s_.size() && s_[i_] == ']') {
                    ++i_;
                    return true;
                }
                return fail("expected ',' or ']'");
            }
        }
        if (c == '"') {
            v->kind = Value::STRING;
            return string(&v->str);
        }
        if (c == 't' || c == 'f') {
            v->kind = Value::BOOL;
            v->b = (c == 't');
            return lit(c == 't' ? "true" : "false");
        }
        if (c == 'n') {
            v->kind = Value::NUL;
            return lit("null");
        }
        return number(v);
    }

    const std::string &s_;
    size_t i_ = 0;
    std::string err_;
};

} // namespace jsonmini

#endif
