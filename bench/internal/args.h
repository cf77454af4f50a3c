// Command-line arguments of the benchmark tools: "--name=value" pairs (or "--name" for true),
// looked up by name with a default. Unknown names are an error, so a typo does not silently
// run the wrong case.
//
//   Args args(argc, argv);
//   const int cpu = args.Int("cpu", 0);
//   const std::string mode = args.String("mode", "kernel");
//   if (!args.Unused().empty()) { ...usage... }
#ifndef QUADSOCK_BENCH_INTERNAL_ARGS_H_
#define QUADSOCK_BENCH_INTERNAL_ARGS_H_

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace quadsock::bench {

class Args {
 public:
  Args(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a.rfind("--", 0) != 0) {
        positional_.push_back(a);
        continue;
      }
      a = a.substr(2);
      const size_t eq = a.find('=');
      if (eq == std::string::npos) {
        values_[a] = "true";
      } else {
        values_[a.substr(0, eq)] = a.substr(eq + 1);
      }
    }
  }

  std::string String(const std::string& name, const std::string& fallback) {
    used_.insert(name);
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }
  long long Int(const std::string& name, long long fallback) {
    const std::string v = String(name, "");
    return v.empty() ? fallback : std::strtoll(v.c_str(), nullptr, 0);
  }
  double Double(const std::string& name, double fallback) {
    const std::string v = String(name, "");
    return v.empty() ? fallback : std::strtod(v.c_str(), nullptr);
  }
  bool Bool(const std::string& name, bool fallback) {
    const std::string v = String(name, "");
    if (v.empty()) return fallback;
    return v == "true" || v == "1" || v == "yes" || v == "on";
  }

  // Arguments that no lookup asked for (call after all lookups), and positional ones.
  std::vector<std::string> Unused() const {
    std::vector<std::string> out = positional_;
    for (const auto& [name, value] : values_) {
      if (used_.count(name) == 0) out.push_back("--" + name);
    }
    return out;
  }

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> used_;
  std::vector<std::string> positional_;
};

}  // namespace quadsock::bench

#endif  // QUADSOCK_BENCH_INTERNAL_ARGS_H_
