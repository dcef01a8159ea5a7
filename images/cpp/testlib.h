// testlib.h for Airlock's cpp image: the part of testlib's API that checkers and interactors use,
// written for Airlock (docs/contest-judging.md lists what it offers and what it does not).
//
// A checker runs as `checker <input> <output> <answer>`; an interactor as `interactor <input>
// <output>`, reading the program's output on stdin and writing to the program on stdout. The
// verdict is the exit code, as testlib's: 0 ok, 1 wrong answer, 2 presentation error, 3 judge
// failure, 7 points; the message goes to stderr after the verdict's name ("ok ", "wrong answer ",
// "wrong output format ", "FAIL ", "points <value> ").
#ifndef AIRLOCK_TESTLIB_H
#define AIRLOCK_TESTLIB_H

#include <unistd.h>
#include <fcntl.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#define OK_EXIT_CODE 0
#define WA_EXIT_CODE 1
#define PE_EXIT_CODE 2
#define FAIL_EXIT_CODE 3
#define POINTS_EXIT_CODE 7

enum TResult { _ok = 0, _wa = 1, _pe = 2, _fail = 3, _dirt = 4, _points = 5, _unexpected_eof = 8 };
enum TMode { _input, _output, _answer };
enum TTestlibMode { _unknown, _checker, _interactor };

static TTestlibMode testlibMode = _unknown;
static bool __testlib_quitted = false;

#define __TESTLIB_PRINTF(f, a) __attribute__((format(printf, f, a)))

static inline std::string __testlib_vformat(const char *fmt, va_list ap) {
    va_list measured;
    va_copy(measured, ap);
    int size = vsnprintf(nullptr, 0, fmt, measured);
    va_end(measured);
    if (size < 0)
        return fmt;
    std::string text(size_t(size) + 1, '\0');
    vsnprintf(&text[0], text.size(), fmt, ap);
    text.resize(size_t(size));
    return text;
}

// The text a printf-style function's (fmt, ...) arguments make, as `name`.
#define __TESTLIB_FORMATTED(name) \
    std::string name;             \
    do {                          \
        va_list ap;               \
        va_start(ap, fmt);        \
        name = __testlib_vformat(fmt, ap); \
        va_end(ap);               \
    } while (0)

static inline std::string format(const char *fmt, ...) __TESTLIB_PRINTF(1, 2);
static inline std::string format(const char *fmt, ...) {
    __TESTLIB_FORMATTED(text);
    return text;
}

template <typename T>
static inline std::string vtos(const T &value) {
    std::ostringstream out;
    out << value;
    return out.str();
}

template <typename T>
static inline std::string toString(const T &value) {
    return vtos(value);
}

static inline std::string englishEnding(int x) {
    x %= 100;
    if (x / 10 == 1)
        return "th";
    if (x % 10 == 1)
        return "st";
    if (x % 10 == 2)
        return "nd";
    if (x % 10 == 3)
        return "rd";
    return "th";
}

static inline std::string upperCase(std::string s) {
    for (char &c : s)
        c = char(toupper((unsigned char)c));
    return s;
}

static inline std::string lowerCase(std::string s) {
    for (char &c : s)
        c = char(tolower((unsigned char)c));
    return s;
}

static inline std::string trim(const std::string &s) {
    size_t first = s.find_first_not_of(" \t\r\n");
    if (first == std::string::npos)
        return "";
    return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

// A long text shortened for a message: its start and its end.
static inline std::string compress(const std::string &s) {
    if (s.length() <= 64)
        return s;
    return s.substr(0, 30) + "..." + s.substr(s.length() - 31);
}

static inline std::string __testlib_points_text(double points) {
    std::string text = format("%.10f", points);
    if (text.find('.') != std::string::npos) {
        while (!text.empty() && text.back() == '0')
            text.pop_back();
        if (!text.empty() && text.back() == '.')
            text.pop_back();
    }
    return text == "-0" ? "0" : text;
}

class InStream;
static void __testlib_end(TResult result, const std::string &message);

static inline bool doubleCompare(double expected, double result, double maxError) {
    if (std::isnan(expected) || std::isnan(result))
        return std::isnan(expected) && std::isnan(result);
    if (std::isinf(expected) || std::isinf(result))
        return expected == result;
    if (std::fabs(result - expected) <= maxError + 1e-15)
        return true;
    double low = std::min(expected * (1.0 - maxError), expected * (1.0 + maxError));
    double high = std::max(expected * (1.0 - maxError), expected * (1.0 + maxError));
    return result + 1e-15 >= low && result <= high + 1e-15;
}

static inline double doubleDelta(double expected, double result) {
    double absolute = std::fabs(result - expected);
    if (std::fabs(expected) > 1e-9)
        return std::min(absolute, absolute / std::fabs(expected));
    return absolute;
}

class InStream {
public:
    std::string name;
    TMode mode = _input;
    bool opened = false;

    InStream() = default;
    InStream(const InStream &) = delete;
    InStream &operator=(const InStream &) = delete;

    void init(const char *path, TMode streamMode) {
        mode = streamMode;
        name = path;
        fd_ = open(path, O_RDONLY | O_CLOEXEC);
        if (fd_ < 0)
            __testlib_end(_fail, format("cannot open %s: %s", path, strerror(errno)));
        opened = true;
    }

    void initDescriptor(int fd, const char *streamName, TMode streamMode) {
        mode = streamMode;
        name = streamName;
        fd_ = fd;
        opened = true;
    }

    // -- characters ------------------------------------------------------------------------
    int curChar() { return peek(); }
    int nextChar() { return get(); }
    void skipChar() { get(); }
    void unreadChar(char) {}

    char readChar() {
        int c = get();
        if (c == EOF)
            quit(_unexpected_eof, "Unexpected end of file - char expected");
        return char(c);
    }

    char readChar(char expected) {
        int c = get();
        if (c == EOF)
            quitf(_unexpected_eof, "Unexpected end of file - '%c' expected", expected);
        if (c != expected)
            quitf(_pe, "Unexpected character '%c', but '%c' expected", char(c), expected);
        return char(c);
    }

    char readSpace() { return readChar(' '); }

    void skipBlanks() {
        while (isBlank(peek()))
            get();
    }

    bool eof() { return peek() == EOF; }

    bool seekEof() {
        skipBlanks();
        return eof();
    }

    // True at the end of a line (which it consumes) or of the file.
    bool eoln() {
        int c = peek();
        if (c == EOF)
            return true;
        if (c == '\r') {
            get();
            if (peek() == '\n')
                get();
            return true;
        }
        if (c == '\n') {
            get();
            return true;
        }
        return false;
    }

    bool seekEoln() {
        while (peek() == ' ' || peek() == '\t')
            get();
        return eoln();
    }

    void nextLine() { readLine(); }

    void readEoln() {
        if (!eoln())
            quit(_pe, "Expected EOLN");
    }

    void readEof() {
        if (!eof())
            quit(_pe, "Expected EOF");
    }

    // -- tokens ----------------------------------------------------------------------------
    std::string readToken() {
        skipBlanks();
        if (eof())
            quit(_unexpected_eof, "Unexpected end of file - token expected");
        std::string token;
        while (!eof() && !isBlank(peek()))
            token.push_back(char(get()));
        return token;
    }

    std::string readWord() { return readToken(); }
    std::string readString() { return readLine(); }

    std::vector<std::string> readTokens(int size, int indexBase = 1) {
        (void)indexBase;
        std::vector<std::string> tokens;
        for (int i = 0; i < size; i++)
            tokens.push_back(readToken());
        return tokens;
    }

    std::vector<std::string> readWords(int size, int indexBase = 1) { return readTokens(size, indexBase); }

    std::string readLine() {
        if (eof())
            quit(_unexpected_eof, "Unexpected end of file - line expected");
        std::string line;
        while (!eof() && peek() != '\n' && peek() != '\r')
            line.push_back(char(get()));
        eoln();
        return line;
    }

    std::vector<std::string> readLines(int size, int indexBase = 1) {
        (void)indexBase;
        std::vector<std::string> lines;
        for (int i = 0; i < size; i++)
            lines.push_back(readLine());
        return lines;
    }

    // -- numbers ---------------------------------------------------------------------------
    long long readLong() { return parseInteger(readToken()); }

    long long readLong(long long minv, long long maxv, const std::string &variableName = "") {
        long long value = readLong();
        if (value < minv || value > maxv)
            quit(_wa, rangeMessage("Integer", vtos(value), vtos(minv), vtos(maxv), variableName));
        return value;
    }

    unsigned long long readUnsignedLong() {
        std::string token = readToken();
        if (token.empty() || token[0] == '-')
            quit(_pe, "Expected unsigned integer, but \"" + compress(token) + "\" found");
        return (unsigned long long)parseUnsigned(token);
    }

    int readInt() {
        long long value = readLong();
        if (value < INT_MIN || value > INT_MAX)
            quit(_pe, "Expected int32, but \"" + vtos(value) + "\" found");
        return int(value);
    }

    int readInt(int minv, int maxv, const std::string &variableName = "") {
        int value = readInt();
        if (value < minv || value > maxv)
            quit(_wa, rangeMessage("Integer", vtos(value), vtos(minv), vtos(maxv), variableName));
        return value;
    }

    int readInteger() { return readInt(); }

    std::vector<int> readInts(int size, int minv = INT_MIN, int maxv = INT_MAX, const std::string &name = "",
                              int indexBase = 1) {
        (void)indexBase;
        std::vector<int> values;
        for (int i = 0; i < size; i++)
            values.push_back(readInt(minv, maxv, name));
        return values;
    }

    std::vector<long long> readLongs(int size, long long minv = LLONG_MIN, long long maxv = LLONG_MAX,
                                     const std::string &name = "", int indexBase = 1) {
        (void)indexBase;
        std::vector<long long> values;
        for (int i = 0; i < size; i++)
            values.push_back(readLong(minv, maxv, name));
        return values;
    }

    double readDouble() { return parseDouble(readToken()); }
    double readReal() { return readDouble(); }

    double readDouble(double minv, double maxv, const std::string &variableName = "") {
        double value = readDouble();
        if (value < minv || value > maxv)
            quit(_wa, rangeMessage("Double", vtos(value), vtos(minv), vtos(maxv), variableName));
        return value;
    }

    double readReal(double minv, double maxv, const std::string &variableName = "") {
        return readDouble(minv, maxv, variableName);
    }

    std::vector<double> readDoubles(int size, double minv, double maxv, const std::string &name = "",
                                    int indexBase = 1) {
        (void)indexBase;
        std::vector<double> values;
        for (int i = 0; i < size; i++)
            values.push_back(readDouble(minv, maxv, name));
        return values;
    }

    std::vector<double> readReals(int size, double minv, double maxv, const std::string &name = "",
                                  int indexBase = 1) {
        return readDoubles(size, minv, maxv, name, indexBase);
    }

    // A number written with between minAfterPoint and maxAfterPoint digits after its point.
    double readStrictDouble(double minv, double maxv, int minAfterPoint, int maxAfterPoint,
                            const std::string &variableName = "") {
        std::string token = readToken();
        size_t point = token.find('.');
        int after = point == std::string::npos ? 0 : int(token.size() - point - 1);
        if (token.find_first_of("eE") != std::string::npos || after < minAfterPoint || after > maxAfterPoint)
            quit(_pe, "Expected strict double with " + vtos(minAfterPoint) + ".." + vtos(maxAfterPoint) +
                          " digits after the point, but \"" + compress(token) + "\" found");
        double value = parseDouble(token);
        if (value < minv || value > maxv)
            quit(_wa, rangeMessage("Double", vtos(value), vtos(minv), vtos(maxv), variableName));
        return value;
    }

    double readStrictReal(double minv, double maxv, int minAfterPoint, int maxAfterPoint,
                          const std::string &variableName = "") {
        return readStrictDouble(minv, maxv, minAfterPoint, maxAfterPoint, variableName);
    }

    // -- verdicts --------------------------------------------------------------------------
    // The end, with this stream's share of the blame: what goes wrong reading the program's
    // output is the program's; reading the input or the answer, the judge's.
    [[noreturn]] void quit(TResult result, const std::string &message) {
        if (result == _unexpected_eof || result == _dirt)
            result = _pe;
        if (mode != _output && result != _fail)
            __testlib_end(_fail, message + " (" + streamName() + ")");
        __testlib_end(result, message);
        std::abort();
    }

    [[noreturn]] void quit(TResult result, const char *message) { quit(result, std::string(message)); }

    [[noreturn]] void quitf(TResult result, const char *fmt, ...) __TESTLIB_PRINTF(3, 4) {
        __TESTLIB_FORMATTED(message);
        quit(result, message);
    }

    void ensuref(bool condition, const char *fmt, ...) __TESTLIB_PRINTF(3, 4) {
        if (condition)
            return;
        __TESTLIB_FORMATTED(message);
        quit(_wa, message);
    }

private:
    int fd_ = -1;
    std::vector<char> buffer_;
    size_t position_ = 0;
    bool ended_ = false;

    static bool isBlank(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

    std::string streamName() const {
        return mode == _input ? "input" : mode == _answer ? "answer" : "output";
    }

    // Reads what is there, never more: an interactor must not wait for bytes the program has
    // not written yet.
    bool fill() {
        if (position_ < buffer_.size())
            return true;
        if (ended_ || fd_ < 0)
            return false;
        buffer_.resize(1 << 16);
        position_ = 0;
        ssize_t got;
        do {
            got = read(fd_, buffer_.data(), buffer_.size());
        } while (got < 0 && errno == EINTR);
        if (got <= 0) {
            buffer_.clear();
            ended_ = true;
            return false;
        }
        buffer_.resize(size_t(got));
        return true;
    }

    int peek() { return fill() ? (unsigned char)buffer_[position_] : EOF; }

    int get() { return fill() ? (unsigned char)buffer_[position_++] : EOF; }

    std::string rangeMessage(const char *what, const std::string &value, const std::string &minv,
                             const std::string &maxv, const std::string &variableName) {
        std::string named = variableName.empty() ? "" : " (" + variableName + ")";
        return std::string(what) + " " + value + " violates the range [" + minv + ", " + maxv + "]" + named;
    }

    unsigned long long parseUnsigned(const std::string &digits) {
        if (digits.empty() || digits.size() > 20 || (digits.size() > 1 && digits[0] == '0'))
            quit(_pe, "Expected integer, but \"" + compress(digits) + "\" found");
        unsigned long long value = 0;
        for (char c : digits) {
            if (c < '0' || c > '9')
                quit(_pe, "Expected integer, but \"" + compress(digits) + "\" found");
            unsigned long long next = value * 10 + unsigned(c - '0');
            if (next / 10 != value)
                quit(_pe, "Expected integer, but \"" + compress(digits) + "\" found");
            value = next;
        }
        return value;
    }

    long long parseInteger(const std::string &token) {
        bool negative = token.size() > 1 && token[0] == '-';
        std::string digits = negative ? token.substr(1) : token;
        if (negative && digits == "0")
            quit(_pe, "Expected integer, but \"" + compress(token) + "\" found");
        unsigned long long magnitude = parseUnsigned(digits);
        unsigned long long bound = negative ? 9223372036854775808ULL : 9223372036854775807ULL;
        if (magnitude > bound)
            quit(_pe, "Expected integer, but \"" + compress(token) + "\" found");
        return negative ? (long long)(0ULL - magnitude) : (long long)magnitude;
    }

    double parseDouble(const std::string &token) {
        // Digits with an optional sign, point and exponent: no "nan", "inf" or hexadecimal.
        size_t i = 0, digits = 0;
        if (i < token.size() && (token[i] == '-' || token[i] == '+'))
            i++;
        while (i < token.size() && isdigit((unsigned char)token[i]))
            i++, digits++;
        if (i < token.size() && token[i] == '.') {
            i++;
            while (i < token.size() && isdigit((unsigned char)token[i]))
                i++, digits++;
        }
        if (digits > 0 && i < token.size() && (token[i] == 'e' || token[i] == 'E')) {
            i++;
            if (i < token.size() && (token[i] == '-' || token[i] == '+'))
                i++;
            size_t exponent = 0;
            while (i < token.size() && isdigit((unsigned char)token[i]))
                i++, exponent++;
            if (exponent == 0)
                digits = 0;
        }
        if (digits == 0 || i != token.size())
            quit(_pe, "Expected double, but \"" + compress(token) + "\" found");
        double value = strtod(token.c_str(), nullptr);
        if (!std::isfinite(value))
            quit(_pe, "Expected double, but \"" + compress(token) + "\" found");
        return value;
    }
};

static InStream inf;
static InStream ouf;
static InStream ans;
// The interactor's output file (its second argument), for what a later checker reads.
static std::ofstream tout;

static void __testlib_end(TResult result, const std::string &given) {
    std::string message = given;
    // A checker may only accept an output it has read to the end.
    if (result == _ok && testlibMode == _checker && ouf.opened && !__testlib_quitted) {
        __testlib_quitted = true;
        if (!ouf.seekEof()) {
            result = _pe;
            message = "Extra information in the output file";
        }
    }
    __testlib_quitted = true;
    const char *name = "FAIL ";
    int code = FAIL_EXIT_CODE;
    switch (result) {
        case _ok: name = "ok "; code = OK_EXIT_CODE; break;
        case _wa: name = "wrong answer "; code = WA_EXIT_CODE; break;
        case _pe: case _dirt: case _unexpected_eof: name = "wrong output format "; code = PE_EXIT_CODE; break;
        case _points: name = "points "; code = POINTS_EXIT_CODE; break;
        case _fail: break;
    }
    std::cout.flush();
    fflush(stdout);
    if (tout.is_open())
        tout.close();
    fprintf(stderr, "%s%s\n", name, message.c_str());
    fflush(stderr);
    _exit(code);
}

[[noreturn]] static inline void quit(TResult result, const std::string &message) {
    __testlib_end(result, message);
    std::abort();
}

[[noreturn]] static inline void quit(TResult result, const char *message) { quit(result, std::string(message)); }

[[noreturn]] static inline void quitf(TResult result, const char *fmt, ...) __TESTLIB_PRINTF(2, 3);
[[noreturn]] static inline void quitf(TResult result, const char *fmt, ...) {
    __TESTLIB_FORMATTED(message);
    quit(result, message);
}

static inline void quitif(bool condition, TResult result, const char *fmt, ...) __TESTLIB_PRINTF(3, 4);
static inline void quitif(bool condition, TResult result, const char *fmt, ...) {
    if (!condition)
        return;
    __TESTLIB_FORMATTED(message);
    quit(result, message);
}

// Points for the test: a fraction from 0 to 1 of what it is worth.
[[noreturn]] static inline void quitp(double points, const std::string &message = "") {
    std::string text = __testlib_points_text(points);
    quit(_points, message.empty() ? text : text + " " + message);
}

[[noreturn]] static inline void quitp(double points, const char *fmt, ...) __TESTLIB_PRINTF(2, 3);
[[noreturn]] static inline void quitp(double points, const char *fmt, ...) {
    __TESTLIB_FORMATTED(message);
    quitp(points, message);
}

[[noreturn]] static inline void quitp(int points, const char *fmt, ...) __TESTLIB_PRINTF(2, 3);
[[noreturn]] static inline void quitp(int points, const char *fmt, ...) {
    __TESTLIB_FORMATTED(message);
    quitp(double(points), message);
}

static inline void __testlib_ensure(bool condition, const std::string &message) {
    if (!condition)
        quit(_fail, message);
}

#define ensure(condition) __testlib_ensure((condition), "Condition failed: \"" #condition "\"")

static inline void ensuref(bool condition, const char *fmt, ...) __TESTLIB_PRINTF(2, 3);
static inline void ensuref(bool condition, const char *fmt, ...) {
    if (condition)
        return;
    __TESTLIB_FORMATTED(message);
    quit(_fail, message);
}

static inline void setName(const char *fmt, ...) __TESTLIB_PRINTF(1, 2);
static inline void setName(const char *, ...) {}

// A checker or interactor that returns from main without a verdict is broken.
static inline void __testlib_no_verdict() {
    if (!__testlib_quitted)
        __testlib_end(_fail, "the checker or interactor ended without a verdict (quitf)");
}

static inline void registerTestlibCmd(int argc, char *argv[]) {
    testlibMode = _checker;
    std::vector<char *> files;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "--testset") || !strcmp(argv[i], "--group")) && i + 1 < argc)
            i++;
        else
            files.push_back(argv[i]);
    }
    if (files.size() < 3)
        quit(_fail, "usage: checker <input-file> <output-file> <answer-file>");
    inf.init(files[0], _input);
    ouf.init(files[1], _output);
    ans.init(files[2], _answer);
    atexit(__testlib_no_verdict);
}

static inline void registerInteraction(int argc, char *argv[]) {
    testlibMode = _interactor;
    if (argc < 3)
        quit(_fail, "usage: interactor <input-file> <output-file> [<answer-file>]");
    inf.init(argv[1], _input);
    tout.open(argv[2]);
    if (!tout.is_open())
        quit(_fail, std::string("cannot open ") + argv[2]);
    if (argc > 3)
        ans.init(argv[3], _answer);
    ouf.initDescriptor(STDIN_FILENO, "stdin", _output);
    atexit(__testlib_no_verdict);
}

#endif
