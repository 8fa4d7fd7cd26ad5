// Sanitizer defaults compiled into every executable of a sanitizer build
// (cmake/PrismSanitizers.cmake): options and the suppression files beside this
// one, so that prism, prism_tests, ctest and the fuzzers behave alike without
// environment variables. ASAN_OPTIONS / UBSAN_OPTIONS / LSAN_OPTIONS set by the
// user are parsed after these and win.
#ifndef PRISM_SANITIZER_DIR
#error "PRISM_SANITIZER_DIR must name test/sanitizers (cmake/PrismSanitizers.cmake sets it)"
#endif

extern "C" {

// A report is a failure: UBSan stops at the first one (as ASan does) so that a
// test or a fuzzer cannot pass over it.
const char* __ubsan_default_options() {
  return "halt_on_error=1:print_stacktrace=1:report_error_type=1:suppressions=" PRISM_SANITIZER_DIR "/ubsan.supp";
}

const char* __lsan_default_options() { return "suppressions=" PRISM_SANITIZER_DIR "/lsan.supp:print_suppressions=0"; }

const char* __asan_default_options() {
  // check_initialization_order: static initialisers that read another TU's globals.
  return "check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1:"
         "suppressions=" PRISM_SANITIZER_DIR "/asan.supp";
}

}  // extern "C"
