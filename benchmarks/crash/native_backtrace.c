// A SIGSEGV / SIGBUS / SIGFPE / SIGABRT handler that writes the native stack (addresses
// within each library) to the file named by NATIVE_BACKTRACE_LOG, for the GPU script's
// suites: pytest's capture would swallow anything written to stderr by a dying process.
// Runs on its own stack, so a stack overflow is reported too. Loaded by the pytest plugin
// beside it, which installs the handler again before each test (a library loaded later
// may have replaced it).
#define _GNU_SOURCE
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int out_fd = -1;
static const int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NSIG_HANDLED (sizeof kSignals / sizeof kSignals[0])
static struct sigaction previous[NSIG_HANDLED];  // what was there first (Python's faulthandler)
static int have_previous[NSIG_HANDLED];

static void report(int sig, siginfo_t* info, void* context) {
  (void)context;
  static volatile sig_atomic_t reported = 0;
  if (reported) {  // back here through the handler chained below: end it
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  reported = 1;
  void* frames[256];
  int n = backtrace(frames, 256);
  char line[160];
  int len = snprintf(line, sizeof line, "native crash: signal %d at address %p\n", sig, info->si_addr);
  if (out_fd >= 0) {
    if (write(out_fd, line, (size_t)len) < 0) {}
    backtrace_symbols_fd(frames, n, out_fd);
    if (write(out_fd, "end of native stack\n", 20) < 0) {}
  }
  // Then whatever handled it before (Python's faulthandler prints the Python stack), or
  // the default action.
  for (size_t i = 0; i < NSIG_HANDLED; ++i)
    if (kSignals[i] == sig) {
      if (have_previous[i]) sigaction(sig, &previous[i], NULL);
      else signal(sig, SIG_DFL);
    }
  raise(sig);
}

void native_backtrace_install(void) {
  static char alternate_stack[1 << 16];
  stack_t st;
  st.ss_sp = alternate_stack;
  st.ss_size = sizeof alternate_stack;
  st.ss_flags = 0;
  sigaltstack(&st, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = report;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  for (size_t i = 0; i < NSIG_HANDLED; ++i) {
    struct sigaction old;
    sigaction(kSignals[i], &sa, &old);
    if (!have_previous[i] && old.sa_sigaction != report && old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
      previous[i] = old;
      have_previous[i] = 1;
    }
  }
}

__attribute__((constructor)) static void at_load(void) {
  const char* path = getenv("NATIVE_BACKTRACE_LOG");
  if (path) out_fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  native_backtrace_install();
}
