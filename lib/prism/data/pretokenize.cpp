#include "prism/data/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include <new>

#include "prism/error.h"

namespace prism {

namespace {

// GPT-2's pre-tokenisation pattern as tiktoken spells it:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// tiktoken's regex engine reads \s as Unicode White_Space. PCRE2's \s is ASCII
// only without PCRE2_UCP and takes U+180E too with it, so \s is spelled out as
// exactly the White_Space set (the parity text has U+180E and its neighbours).
#define PRISM_WS "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
constexpr const char* kPattern =
    "'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^" PRISM_WS "\\p{L}\\p{N}]+|[" PRISM_WS "]+(?![^" PRISM_WS
    "])|[" PRISM_WS "]+";
#undef PRISM_WS

}  // namespace

struct Pretokenizer::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;

  ~Impl() {
    if (code) pcre2_code_free(code);
  }

  // The calling thread's match state (one per thread, reused by every Pretokenizer).
  struct Scratch {
    pcre2_match_data* match = nullptr;
    pcre2_match_context* context = nullptr;
    pcre2_jit_stack* stack = nullptr;
    Scratch() {
      match = pcre2_match_data_create(1, nullptr);
      context = pcre2_match_context_create(nullptr);
      stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
      if (!match || !context || !stack) throw std::bad_alloc();
      pcre2_jit_stack_assign(context, nullptr, stack);
    }
    ~Scratch() {
      pcre2_match_data_free(match);
      pcre2_match_context_free(context);
      pcre2_jit_stack_free(stack);
    }
  };
  static Scratch& scratch() {
    thread_local Scratch s;
    return s;
  }
};

Pretokenizer::Pretokenizer() : impl_(std::make_unique<Impl>()) {
  int err = 0;
  PCRE2_SIZE err_at = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED, PCRE2_UTF, &err, &err_at,
                              nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error(fmt::format("cannot compile the GPT-2 regex at {}: {}", err_at, reinterpret_cast<char*>(msg)), "PCRE2",
                "install a PCRE2 built with Unicode support (libpcre2-dev)");
  }
  // Without JIT (a platform PCRE2 cannot JIT for) the interpreter gives the same pieces, slower.
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Pretokenizer::~Pretokenizer() = default;
Pretokenizer::Pretokenizer(Pretokenizer&&) noexcept = default;
Pretokenizer& Pretokenizer::operator=(Pretokenizer&&) noexcept = default;

bool Pretokenizer::next(std::string_view text, size_t& off, std::string_view& piece) const {
  if (off >= text.size()) return false;
  Impl::Scratch& s = Impl::scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // The text is valid UTF-8 (the caller's contract), so PCRE2 need not check it again per call.
  const int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, text.size(), off, 0, s.match, s.context)
                            : pcre2_match(impl_->code, subject, text.size(), off, PCRE2_NO_UTF_CHECK, s.match, s.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    throw Error(fmt::format("pre-tokenisation regex failed at byte {}: {}", off, reinterpret_cast<char*>(msg)),
                "tokenizer input", "report this with the text that causes it");
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.match);
  if (ov[1] <= off) return false;  // cannot happen: the pattern has no empty match
  piece = text.substr(ov[0], ov[1] - ov[0]);
  off = ov[1];
  return true;
}

}  // namespace prism
