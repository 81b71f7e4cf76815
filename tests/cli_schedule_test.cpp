// Tests of `ccoll schedule` (tools/ccoll/schedule_args.hpp): options and their errors, shipped
// profiles by name, every policy, --evaluate against the planners' own typings, JSON and traces.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../tools/ccoll/schedule_args.hpp"

namespace {

struct Run {
  int rc;
  std::string out, err;
};

Run schedule(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int rc = ccoll::cli::run_schedule(args, out, err);
  return Run{rc, out.str(), err.str()};
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("ccoll_cli_schedule_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

const std::string kProfiles = std::string(CCOLL_SOURCE_DIR) + "/data/profiles/";

}  // namespace

TEST_CASE("schedule: usage errors name the option") {
  auto r = schedule({"--policy", "mg"});
  CHECK(r.rc == 2);
  CHECK(r.err.find("--profile") != std::string::npos);
  r = schedule({"--profile", "resnet50", "--policy", "mgwfbp"});
  CHECK(r.rc == 2);
  CHECK(r.err.find("mgwfbp") != std::string::npos);
  r = schedule({"--profile", "resnet50", "--policy", "mg", "--gamma", "0.5"});
  CHECK(r.rc == 2);
  CHECK(r.err.find("--gamma") != std::string::npos);
  r = schedule({"--profile", "resnet50", "--policy", "mg", "--collective", "mesh"});
  CHECK(r.rc == 2);
  CHECK(r.err.find("mesh") != std::string::npos);
  r = schedule({"--profile", "nosuchmodel", "--policy", "mg"});
  CHECK(r.rc == 1);
  CHECK(r.err.find("nosuchmodel") != std::string::npos);
  CHECK(schedule({"--help"}).rc == 0);
}

TEST_CASE("schedule: --policy takes a comma list, empty items skipped, all expands") {
  auto r = schedule({"--profile", "resnet50", "--policy", "wfbp,,mg", "--json"});
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.is_array());
  REQUIRE(j.size() == 2);
  CHECK(j[0].at("policy") == "wfbp");
  CHECK(j[1].at("policy") == "mg");
  r = schedule({"--profile", "googlenet", "--policy", "all", "--time-limit", "0.05", "--json"});
  REQUIRE(r.rc == 0);
  CHECK(nlohmann::json::parse(r.out).size() == 8);
}

TEST_CASE(
    "schedule: every policy on a shipped model, the documented JSON form (docs/schedules.md)") {
  for (const char* pol :
       {"wfbp", "single", "mg", "mg-paper", "asc", "optimal", "bucket", "horovod"}) {
    const auto r =
        schedule({"--profile", "resnet50", "--policy", pol, "--json", "--time-limit", "0.05"});
    CAPTURE(pol);
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j.at("policy") == pol);
    CHECK(j.at("layer_types").size() == 161);
    CHECK(j.at("layer_types")[0] != "m");
    CHECK(j.at("predicted_iteration_s").get<double>() >= j.at("backward_end_s").get<double>());
    // Messages cover layers 161..1 in order; times are consistent.
    int expect = 161;
    for (const auto& m : j.at("messages")) {
      for (const auto& l : m.at("layers")) CHECK(l.get<int>() == expect--);
      CHECK(m.at("end_s").get<double>() >= m.at("start_s").get<double>());
    }
    CHECK(expect == 0);
    if (std::string(pol) == "optimal") {
      CHECK(j.at("lower_bound_s").get<double>() <= j.at("predicted_iteration_s").get<double>());
      CHECK(j.contains("proven_optimal"));
    }
  }
}

TEST_CASE("schedule: --evaluate reproduces a planner's prediction from its layer types") {
  const auto planned =
      schedule({"--profile", kProfiles + "googlenet.json", "--policy", "asc", "--json",
                "--collective", "ring", "--workers", "64", "--a", "5e-5", "--b", "8e-10"});
  REQUIRE(planned.rc == 0);
  const auto j = nlohmann::json::parse(planned.out);
  const std::string path = temp_path("typing.json");
  std::ofstream(path) << nlohmann::json{{"layer_types", j.at("layer_types")},
                                        {"max_concurrent", j.at("max_concurrent")}}
                             .dump();
  const auto ev =
      schedule({"--profile", kProfiles + "googlenet.json", "--evaluate", path, "--json",
                "--collective", "ring", "--workers", "64", "--a", "5e-5", "--b", "8e-10"});
  REQUIRE(ev.rc == 0);
  const auto e = nlohmann::json::parse(ev.out);
  CHECK(e.at("predicted_iteration_s").get<double>() ==
        doctest::Approx(j.at("predicted_iteration_s").get<double>()).epsilon(1e-12));
  std::ofstream(path) << R"({"layer_types": "nnm"})";
  const auto bad = schedule({"--profile", kProfiles + "googlenet.json", "--evaluate", path});
  CHECK(bad.rc == 1);
  CHECK(bad.err.find("3 entries") != std::string::npos);
  std::filesystem::remove(path);
}

TEST_CASE("schedule: table of all policies and a Chrome trace") {
  const std::string trace = temp_path("trace.json");
  const auto r = schedule({"--profile", "densenet201", "--policy", "all", "--trace", trace});
  REQUIRE(r.rc == 0);
  for (const char* pol :
       {"wfbp", "single", "mg", "mg-paper", "asc", "optimal", "bucket", "horovod"})
    CHECK(r.out.find(pol) != std::string::npos);
  CHECK(r.out.find("proven optimal by bound") != std::string::npos);
  std::ifstream in(trace);
  const auto t = nlohmann::json::parse(in);
  CHECK(t.at("traceEvents").size() > 604);  // a slice per backward layer, plus allreduces
  std::filesystem::remove(trace);
}
