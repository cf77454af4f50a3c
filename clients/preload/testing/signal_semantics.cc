// The semantics program's signal checks: a signal during a blocked receive and during poll,
// select and epoll_wait, with each way a program installs its handler, and what sigaction
// reads back afterwards.
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "clients/preload/testing/semantics.h"

// siginterrupt is deprecated, but programs still call it, and the library stands in for it.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace semantics {
namespace {

volatile sig_atomic_t alarms = 0;

void Handled(int) { alarms = alarms + 1; }
void HandledWithInfo(int, siginfo_t* info, void*) { alarms = alarms + (info->si_signo == SIGUSR1); }

// Whether thread `tid` of this process sleeps (state S in /proc).
bool Asleep(pid_t tid) {
  const std::string path = "/proc/self/task/" + std::to_string(tid) + "/stat";
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return false;
  char stat[512];
  const size_t n = std::fread(stat, 1, sizeof(stat) - 1, f);
  std::fclose(f);
  stat[n] = '\0';
  const char* end_of_name = std::strrchr(stat, ')');
  return end_of_name != nullptr && std::strncmp(end_of_name, ") S", 3) == 0;
}

// SIGUSR1 to `thread` once it sleeps in the call it is about to make, or after 150 ms (a
// busy-polled wait spins instead): never before the call on a slow machine.
void RingWhenAsleep(pthread_t thread, pid_t tid) {
  for (int ms = 0; ms < 150 && !Asleep(tid); ++ms) usleep(1000);
  pthread_kill(thread, SIGUSR1);
}

// A receive on `s` that SIGUSR1 interrupts, and a datagram from `peer` 150 ms later would
// end: what it returned, and whether the handler ran.
std::string ReceiveAcrossSignal(int s, int peer, const std::string& local, uint16_t lport) {
  alarms = 0;
  const pthread_t self = pthread_self();
  const pid_t tid = gettid();
  std::thread later([&] {
    RingWhenAsleep(self, tid);
    usleep(150000);
    PeerSend(peer, "after", local, lport);
  });
  char buf[64];
  const int r = static_cast<int>(recv(s, buf, sizeof(buf), 0));
  const std::string what = r > 0 ? std::string(buf, r) : Outcome(r);
  later.join();
  if (r < 0 && Readable(s)) recv(s, buf, sizeof(buf), MSG_DONTWAIT);  // the datagram after
  return what + (alarms == 1 ? " handled" : " not handled");
}

// The program's handler for SIGUSR1 as sigaction shows it: which function, and the flags that
// say how it runs.
std::string ReadBack() {
  struct sigaction now{};
  sigaction(SIGUSR1, nullptr, &now);
  const std::string function = now.sa_handler == SIG_DFL               ? "SIG_DFL"
                               : now.sa_handler == Handled             ? "Handled"
                               : now.sa_sigaction == HandledWithInfo ? "HandledWithInfo"
                                                                       : "another";
  const int flags = SA_RESTART | SA_SIGINFO | SA_RESETHAND | SA_NODEFER | SA_ONSTACK;
  return function + " flags " + std::to_string(now.sa_flags & flags);
}

}  // namespace

void Signals(const std::string& fam, const std::string& local, const std::string& peer_ip) {
  uint16_t pport, lport;
  const int peer = Peer(peer_ip, &pport);
  const int s = Local(local, &lport);
  const auto receive = [&](const std::string& how) {
    Say(fam + " signal during recv, " + how, ReceiveAcrossSignal(s, peer, local, lport));
  };

  // A handler without SA_RESTART ends a blocked receive with EINTR; with SA_RESTART the
  // receive goes on (the datagram after the signal ends it), unless the socket has a receive
  // timeout. signal() gives SA_RESTART, unless siginterrupt said otherwise.
  struct sigaction sa{};
  sa.sa_handler = Handled;
  sigaction(SIGUSR1, &sa, nullptr);
  receive("no SA_RESTART");
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  receive("SA_RESTART");
  Say(fam + " sigaction reads back", ReadBack());
  timeval rcvtimeo{5, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &rcvtimeo, sizeof(rcvtimeo));
  receive("SA_RESTART, SO_RCVTIMEO");
  rcvtimeo = {0, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &rcvtimeo, sizeof(rcvtimeo));
  struct sigaction info{};
  info.sa_sigaction = HandledWithInfo;
  info.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGUSR1, &info, nullptr);
  receive("SA_SIGINFO");
  Say(fam + " sigaction reads back SA_SIGINFO", ReadBack());
  signal(SIGUSR1, Handled);
  receive("signal()");
  siginterrupt(SIGUSR1, 1);
  receive("siginterrupt");
  signal(SIGUSR1, Handled);
  receive("signal() after siginterrupt");
  Say(fam + " signal() after siginterrupt reads back", ReadBack());
  siginterrupt(SIGUSR1, 0);
  // A one-shot handler: the kernel puts SIG_DFL back after it runs.
  sysv_signal(SIGUSR1, Handled);
  alarms = 0;
  raise(SIGUSR1);
  Say(fam + " sysv_signal's handler ran once, reads back",
      std::to_string(alarms) + " " + ReadBack());

  // Poll, select and epoll_wait end with EINTR even after a handler with SA_RESTART.
  sigaction(SIGUSR1, &sa, nullptr);
  const int watch = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{EPOLLIN, {.fd = s}}, out[4];
  epoll_ctl(watch, EPOLL_CTL_ADD, s, &ev);
  for (const std::string call : {"epoll_wait", "poll", "select"}) {
    alarms = 0;
    std::thread ringer(RingWhenAsleep, pthread_self(), gettid());
    pollfd q{s, POLLIN, 0};
    fd_set set;
    FD_ZERO(&set);
    FD_SET(s, &set);
    timeval tv{5, 0};
    const int r = call == "poll"     ? poll(&q, 1, 5000)
                  : call == "select" ? select(s + 1, &set, nullptr, nullptr, &tv)
                                     : epoll_wait(watch, out, 4, 5000);
    ringer.join();
    Say(fam + " signal during " + call + ", SA_RESTART",
        Outcome(r) + (alarms == 1 ? " handled" : " not handled"));
  }
  close(watch);
  close(s);
  close(peer);
}

}  // namespace semantics
