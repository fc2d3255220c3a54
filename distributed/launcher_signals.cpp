// See launcher_signals.h.
#include "pipebal/distributed/launcher_signals.h"

namespace pipebal::distributed {
namespace {

volatile sig_atomic_t g_interrupt = 0;
volatile sig_atomic_t g_interrupts = 0;
volatile sig_atomic_t g_suspend = 0;
volatile sig_atomic_t g_children = 0;

void on_interrupt(int signal) {
  g_interrupt = signal;
  g_interrupts = g_interrupts + 1;
}

void on_suspend(int) {
  g_suspend = 1;
}

void on_child(int) {
  g_children = 1;
}

}  // namespace

LauncherSignals::LauncherSignals() {
  g_interrupt = 0;
  g_interrupts = 0;
  g_suspend = 0;
  g_children = 0;
  struct sigaction action {};
  sigemptyset(&action.sa_mask);
  action.sa_handler = on_interrupt;
  sigaction(SIGTERM, &action, &old_term_);
  // The terminal's signals, unless found ignored (nohup ignores SIGHUP; a shell without job
  // control, SIGINT and SIGQUIT for a job in its background): the processes inherit them so.
  const auto unless_ignored = [&action](int signal_number, struct sigaction& old) {
    sigaction(signal_number, nullptr, &old);
    if (old.sa_handler != SIG_IGN) sigaction(signal_number, &action, nullptr);
  };
  unless_ignored(SIGINT, old_int_);
  unless_ignored(SIGQUIT, old_quit_);
  unless_ignored(SIGHUP, old_hup_);
  action.sa_handler = on_suspend;
  sigaction(SIGTSTP, &action, &old_tstp_);
  // Tells the launcher when to look at its processes. (Inherited as ignored, by a parent that
  // does not wait for its children, SIGCHLD would make the kernel reap them, and their exit
  // statuses would be lost.)
  action.sa_handler = on_child;
  action.sa_flags = SA_RESTART;
  sigaction(SIGCHLD, &action, &old_chld_);
}

LauncherSignals::~LauncherSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGQUIT, &old_quit_, nullptr);
  sigaction(SIGHUP, &old_hup_, nullptr);
  sigaction(SIGTSTP, &old_tstp_, nullptr);
  sigaction(SIGCHLD, &old_chld_, nullptr);
}

int interrupt_signal() {
  return g_interrupt;
}

int interrupts_received() {
  return g_interrupts;
}

bool take_suspend() {
  if (g_suspend == 0) return false;
  g_suspend = 0;
  return true;
}

bool take_child_signal() {
  if (g_children == 0) return false;
  g_children = 0;
  return true;
}

}  // namespace pipebal::distributed
