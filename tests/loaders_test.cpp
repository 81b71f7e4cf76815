// Hostile input to the file loaders (docs/reliability-loaders.md): NCCL's topology XML, the
// `nvidia-smi topo -m` matrix, the topology JSON and the layer-profile JSON. Every bad input is
// refused with the loader's own exception type (physical::TopologyError, or ccoll::Error for
// profiles) and a bounded message naming the culprit; nothing crashes, recurses with the input's
// depth, allocates with the input's width or accepts a bad number silently. The "fuzz regression"
// cases are inputs that the libFuzzer targets in fuzz/ found against the loaders before the fixes.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ccoll/core/error.hpp"
#include "ccoll/gradient/profile.hpp"
#include "ccoll/physical/json_loader.hpp"
#include "ccoll/physical/load.hpp"
#include "ccoll/physical/nccl_xml_loader.hpp"
#include "ccoll/physical/nvidia_smi_loader.hpp"

namespace loaders_test {
using namespace ccoll::physical;
using ccoll::gradient::profile_from_json_text;

namespace {

// The message of the TopologyError that `f` throws (fails the test when it throws anything else).
template <class F>
std::string topology_error(F&& f) {
  try {
    f();
  } catch (const TopologyError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("not a TopologyError: " << e.what());
  }
  FAIL("no exception");
  return {};
}

// The message of the ccoll::Error (InvalidArgument) that a profile text throws.
std::string profile_error(const std::string& text) {
  try {
    (void)profile_from_json_text(text);
  } catch (const ccoll::Error& e) {
    CHECK(e.code() == ccoll::ErrorCode::InvalidArgument);
    return e.what();
  } catch (const std::exception& e) {
    FAIL("not a ccoll::Error: " << e.what());
  }
  FAIL("no exception");
  return {};
}

std::string xml_error(const std::string& text) {
  return topology_error([&] { (void)topology_from_nccl_xml(text); });
}
std::string smi_error(const std::string& text) {
  return topology_error([&] { (void)topology_from_nvidia_smi(text); });
}
std::string json_error(const std::string& text) {
  return topology_error([&] { (void)topology_from_json_text(text); });
}

// Longest run of character c in s (how much of a long input a message quotes).
std::size_t longest_run(const std::string& s, char c) {
  std::size_t best = 0, cur = 0;
  for (char x : s) best = std::max(best, cur = (x == c ? cur + 1 : 0));
  return best;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A two-GPU NCCL dump with `pci` attributes on the first GPU's <pci>, `gpu` on its <gpu>, `nvl` on
// its <nvlink> and `net` on a NIC's <net>.
std::string dump(const std::string& pci = {}, const std::string& gpu = {},
                 const std::string& nvl = {}, const std::string& net = {}) {
  return "<system version=\"1\"><cpu numaid=\"0\">"
         "<pci busid=\"0000:01:00.0\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\" " +
         pci + "><gpu dev=\"0\" sm=\"80\" " + gpu +
         "><nvlink target=\"0000:02:00.0\" count=\"4\" tclass=\"0x030200\" " + nvl +
         "/></gpu></pci>"
         "<pci busid=\"0000:02:00.0\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">"
         "<gpu dev=\"1\" sm=\"80\"><nvlink target=\"0000:01:00.0\" count=\"4\" "
         "tclass=\"0x030200\"/></gpu></pci>"
         "<nic><net name=\"eth0\" dev=\"0\" speed=\"100000\" " +
         net + "/></nic></cpu></system>";
}

std::string with_attr(const std::string& text, const std::string& from, const std::string& to) {
  std::string s = text;
  const auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  s.replace(at, from.size(), to);
  return s;
}

const std::string kSmiTwo =
    "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tNV4\t0-7\t0\n"
    "GPU1\tNV4\t X \t0-7\t0\n";

}  // namespace

// ---------------------------------------------------------------------------------------------
// NCCL topology XML

TEST_CASE("nccl xml: the reference dump and its attribute forms still load") {
  const auto t = topology_from_nccl_xml(dump());
  CHECK(t.gpus().size() == 2);
  const int g0 = t.require("gpu0"), g1 = t.require("gpu1");
  CHECK(t.direct_capacity_GBps(g0, g1) == doctest::Approx(100));
  // "16 GT/s" (older kernels), a bare number, and empty or "Unknown" figures (the default).
  for (const char* sp : {"16 GT/s", "16", "16.0 GT/s PCIe"}) {
    CAPTURE(sp);
    const auto u = topology_from_nccl_xml(with_attr(dump(), "link_speed=\"16.0 GT/s PCIe\"",
                                                    std::string("link_speed=\"") + sp + "\""));
    CHECK(u.direct_capacity_GBps(u.require("gpu0"), u.require("cpu0")) ==
          doctest::Approx(16 * 16 * 128.0 / 130.0 / 8));
  }
  for (const char* sp : {"", "Unknown", "Unknown speed"}) {
    const auto u = topology_from_nccl_xml(with_attr(dump(), "link_speed=\"16.0 GT/s PCIe\"",
                                                    std::string("link_speed=\"") + sp + "\""));
    CHECK(u.direct_capacity_GBps(u.require("gpu0"), u.require("cpu0")) == doctest::Approx(16));
  }
}

TEST_CASE("nccl xml: deep nesting is refused quickly, at a documented depth") {
  // The issue's input: 578 KB, 17,000 elements deep. Before: a stack overflow (SIGSEGV).
  std::string deep = "<system version=\"1\"><cpu numaid=\"0\">";
  for (int k = 0; k < 17000; ++k) deep += "<pci busid=\"0000:00:00.0\" link_width=\"16\">";
  CHECK(deep.size() > 500000);
  const auto t0 = std::chrono::steady_clock::now();
  const auto msg = xml_error(deep);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(secs < 0.5);
  CHECK(contains(msg, "nested deeper than 64"));
  CHECK(contains(msg, "line 1"));
  CHECK(msg.size() < 200);
  // The same through the CLI's loader (physical::load reads files with this function).
  CHECK(contains(topology_error([&] { (void)topology_from_file_text(deep, "deep.xml"); }),
                 "nested deeper than 64"));
  // 64 levels are read; 65 are not.
  const auto nest = [](std::size_t depth) {
    std::string s;
    for (std::size_t k = 0; k < depth; ++k) s += "<a>";
    for (std::size_t k = 0; k < depth; ++k) s += "</a>";
    return s;
  };
  CHECK_NOTHROW((void)xml_detail::parse(nest(kMaxXmlDepth)));
  CHECK_THROWS_AS((void)xml_detail::parse(nest(kMaxXmlDepth + 1)), TopologyError);
}

TEST_CASE("nccl xml: every numeric attribute is checked, the message names element and value") {
  const auto bad = [](const std::string& text, const std::string& element, const std::string& attr,
                      const std::string& value) {
    CAPTURE(element);
    CAPTURE(attr);
    CAPTURE(value);
    const auto msg = xml_error(text);
    CAPTURE(msg);
    CHECK(contains(msg, "<" + element + ">"));
    CHECK(contains(msg, attr + "=\"" + value + "\""));
    CHECK(contains(msg, "line "));
  };
  const std::string ok = dump();
  bad(with_attr(ok, "link_width=\"16\"", "link_width=\"0\""), "pci", "link_width", "0");
  bad(with_attr(ok, "link_width=\"16\"", "link_width=\"16x\""), "pci", "link_width", "16x");
  bad(with_attr(ok, "link_width=\"16\"", "link_width=\"-16\""), "pci", "link_width", "-16");
  bad(with_attr(ok, "link_speed=\"16.0 GT/s PCIe\"", "link_speed=\"nan\""), "pci", "link_speed",
      "nan");
  bad(with_attr(ok, "link_speed=\"16.0 GT/s PCIe\"", "link_speed=\"inf GT/s\""), "pci",
      "link_speed", "inf");
  bad(with_attr(ok, "link_speed=\"16.0 GT/s PCIe\"", "link_speed=\"1e300 GT/s\""), "pci",
      "link_speed", "1e300");
  bad(with_attr(ok, "link_speed=\"16.0 GT/s PCIe\"", "link_speed=\"fast\""), "pci", "link_speed",
      "fast");
  bad(with_attr(ok, "sm=\"80\"", "sm=\"abc\""), "gpu", "sm", "abc");
  bad(with_attr(ok, "sm=\"80\"", "sm=\"8.0\""), "gpu", "sm", "8.0");
  bad(with_attr(ok, "dev=\"0\"", "dev=\"zero\""), "gpu", "dev", "zero");
  bad(with_attr(ok, "count=\"4\"", "count=\"99999999999\""), "nvlink", "count", "99999999999");
  bad(with_attr(ok, "count=\"4\"", "count=\"0\""), "nvlink", "count", "0");
  bad(with_attr(ok, "count=\"4\"", "count=\"2.5\""), "nvlink", "count", "2.5");
  bad(with_attr(ok, "speed=\"100000\"", "speed=\"-100000\""), "net", "speed", "-100000");
  bad(with_attr(ok, "speed=\"100000\"", "speed=\"nan\""), "net", "speed", "nan");
  bad(with_attr(ok, "speed=\"100000\"", "speed=\"100 Gb\""), "net", "speed", "100 Gb");
  bad(with_attr(ok, "numaid=\"0\"", "numaid=\"0x\""), "cpu", "numaid", "0x");
  bad(with_attr(ok, "busid=\"0000:01:00.0\"", "busid=\"0000:01:00.0<script>\""), "pci", "busid",
      "0000:01:00.0<script>");
  // A long value is quoted in part only.
  const auto msg = xml_error(with_attr(ok, "sm=\"80\"", "sm=\"" + std::string(5000, '9') + "\""));
  CHECK(contains(msg, "<gpu> attribute sm="));
  CHECK(longest_run(msg, '9') <= 40);
}

TEST_CASE("nccl xml: malformed input gets a bounded excerpt with line and offset") {
  // An unterminated tag followed by 200 KB: the message quotes at most 40 characters.
  const std::string text =
      "<system>\n<cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" x=\"" + std::string(200000, 'A');
  const auto msg = xml_error(text);
  CAPTURE(msg);
  CHECK(contains(msg, "unterminated attribute value"));
  CHECK(contains(msg, "line 3"));
  CHECK(contains(msg, "offset "));
  CHECK(msg.size() < 200);
  CHECK(longest_run(msg, 'A') <= 40);
  const auto tag = xml_error("<system>\n<" + std::string(200000, 'B'));
  CHECK(contains(tag, "unterminated tag"));
  CHECK(contains(tag, "line 2, offset 9"));
  CHECK(longest_run(tag, 'B') <= 40);
  // A long element name in a mismatched or unclosed element is cut too.
  const auto mismatch = xml_error("<" + std::string(5000, 'C') + "></x>");
  CHECK(contains(mismatch, "mismatched closing tag"));
  CHECK(longest_run(mismatch, 'C') <= 32);
  const auto unclosed = xml_error("<system><" + std::string(5000, 'D') + ">");
  CHECK(contains(unclosed, "never closed"));
  CHECK(longest_run(unclosed, 'D') <= 32);
  // Control bytes are not echoed.
  CHECK(!contains(xml_error(std::string("<system><\x01\x02\x1b") + "x"), "\x1b"));
}

// ---------------------------------------------------------------------------------------------
// nvidia-smi topo -m

TEST_CASE("nvidia-smi: a small matrix loads; unknown cells are refused naming row and column") {
  const auto t = topology_from_nvidia_smi(kSmiTwo);
  CHECK(t.direct_capacity_GBps(t.require("gpu0"), t.require("gpu1")) == doctest::Approx(100));
  for (const std::string cell : {"FOO", "NV", "NV0", "NV65", "NV1x", "NV-1", "nv1", "X"}) {
    CAPTURE(cell);
    std::string text = "\tGPU0\tGPU1\nGPU0\t X \t";
    text.append(cell).append("\nGPU1\t").append(cell).append("\t X \n");
    const auto msg = smi_error(text);
    CAPTURE(msg);
    CHECK(contains(msg, "row GPU0, column GPU1"));
    CHECK(contains(msg, "\"" + cell + "\""));
  }
  const auto diag = smi_error("\tGPU0\tGPU1\nGPU0\tSYS\tSYS\nGPU1\tSYS\t X \n");
  CHECK(contains(diag, "row GPU0, column GPU0"));
  CHECK(contains(diag, "diagonal"));
  // A long cell is quoted in part.
  const auto longcell =
      smi_error("\tGPU0\tGPU1\nGPU0\t X \t" + std::string(10000, 'Z') + "\nGPU1\tSYS\t X \n");
  CHECK(longest_run(longcell, 'Z') <= 40);
}

TEST_CASE("nvidia-smi: asymmetric pairs are refused naming both cells") {
  const auto msg = smi_error(
      "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV1\tSYS\nGPU1\tNV2\t X \tSYS\n"
      "GPU2\tSYS\tSYS\t X \n");
  CAPTURE(msg);
  CHECK(contains(msg, "asymmetric"));
  CHECK(contains(msg, "row GPU0, column GPU1 is NV1"));
  CHECK(contains(msg, "row GPU1, column GPU0 is NV2"));
  CHECK(contains(smi_error("\tGPU0\tNIC0\nGPU0\t X \tPIX\nNIC0\tSYS\t X \n"), "asymmetric"));
}

TEST_CASE("nvidia-smi: short rows, duplicate and long device names, too many devices") {
  CHECK(contains(smi_error("\tGPU0\tGPU1\nGPU0\t X \nGPU1\tSYS\t X \n"), "row GPU0 has 1 cells"));
  CHECK(contains(smi_error("\tGPU0\tGPU0\nGPU0\t X \tSYS\nGPU0\tSYS\t X \n"), "twice"));
  const auto longname = smi_error("GPU0 GPU" + std::string(10000, '7') + "\n");
  CHECK(longest_run(longname, '7') <= 40);
  const auto wrong_row = smi_error("\tGPU0\tGPU1\n" + std::string(10000, 'W') + "\n");
  CHECK(contains(wrong_row, "expected a row for GPU0"));
  CHECK(longest_run(wrong_row, 'W') <= 40);
}

// ---------------------------------------------------------------------------------------------
// Topology JSON

TEST_CASE("topology json: numbers finite and in range, integers integral") {
  const auto link = [](const std::string& fields) {
    return R"({"nodes": ["a", "b"], "links": [{"a": "a", "b": "b", )" + fields + "}]}";
  };
  const auto t = topology_from_json_text(link(R"("bandwidth_GBps": 25, "count": 2.0)"));
  CHECK(t.direct_capacity_GBps(0, 1) == doctest::Approx(50));
  struct Bad {
    std::string fields, needle;
  };
  for (const Bad& b : std::vector<Bad>{
           {R"("bandwidth_GBps": 1, "count": 1e12)", "\"count\" must be an integer in [1, 1024]"},
           {R"("bandwidth_GBps": 1, "count": 2.5)", "got 2.5"},
           {R"("bandwidth_GBps": 1, "count": 99999999999)", "got 99999999999"},
           {R"("bandwidth_GBps": 1, "count": -3)", "\"count\""},
           {R"("bandwidth_GBps": 1, "count": 0)", "\"count\""},
           {R"("bandwidth_GBps": 1, "count": "2")", "got \"2\""},
           {R"("bandwidth_GBps": 1, "count": true)", "\"count\""},
           {R"("bandwidth_GBps": 1e7)", "\"bandwidth_GBps\" must be a finite number in (0, "},
           {R"("bandwidth_GBps": 0)", "\"bandwidth_GBps\""},
           {R"("bandwidth_GBps": "25")", "\"bandwidth_GBps\""},
           {R"("bandwidth_GBps": 1, "latency_us": -1)", "\"latency_us\""},
           {R"("bandwidth_GBps": 1, "latency_us": 1e9)", "\"latency_us\""},
           {R"("bandwidth_GBps": 1, "latency_us": null)", "\"latency_us\""},
           {R"("bandwidth_GBps": 1, "duplex": 1)", "\"duplex\" must be true or false"},
           {R"("bandwidth_GBps": 1, "type": 7)", "\"type\" must be a string"},
       }) {
    CAPTURE(b.fields);
    const auto msg = json_error(link(b.fields));
    CAPTURE(msg);
    CHECK(contains(msg, b.needle));
    CHECK(contains(msg, "a-b"));
  }
  // 1e400 is not a double: nlohmann refuses it while parsing.
  CHECK(contains(json_error(link(R"("bandwidth_GBps": 1e400)")), "not valid JSON"));
}

TEST_CASE("topology json: fields of the wrong type are TopologyErrors, not json exceptions") {
  CHECK(contains(json_error(R"({"name": 5, "nodes": ["a"]})"), "\"name\" must be a string"));
  CHECK(contains(json_error(R"({"nodes": [{"id": "a", "kind": 5}]})"), "\"kind\""));
  CHECK(contains(json_error(R"({"nodes": [{"id": "a", "host": []}]})"), "\"host\""));
  CHECK(contains(json_error(R"({"nodes": [{"id": 3}]})"), "\"id\""));
  CHECK(contains(json_error(R"({"nodes": ["a"], "active": [1]})"), "active[]"));
  CHECK(contains(json_error(R"({"nodes": [""]})"), "non-empty"));
  const auto longid = json_error(R"({"nodes": [")" + std::string(10000, 'I') + R"("]})");
  CHECK(longest_run(longid, 'I') <= 40);
  CHECK(contains(json_error("{\"nodes\": [1, 2"), "not valid JSON"));
  const auto garbage = json_error("{\"nodes\": \"" + std::string(100000, 'G'));
  CHECK(garbage.size() < 400);
}

// ---------------------------------------------------------------------------------------------
// Layer profiles

TEST_CASE("profile json: integers are type-checked, integral and in range") {
  const auto one = [](const std::string& bytes) {
    return R"({"forward_s": 0.1, "layers": [{"name": "w", "bytes": )" + bytes +
           R"(, "backward_s": 0.01}]})";
  };
  // 1e12 is an integral number: read exactly (before: a garbage count).
  CHECK(profile_from_json_text(one("1e12")).layers[0].bytes == 1000000000000ULL);
  CHECK(profile_from_json_text(one("4096")).layers[0].bytes == 4096);
  for (const std::string b :
       {"2.5", "-1", "1e30", "\"4096\"", "true", "null", "1125899906842625"}) {
    CAPTURE(b);
    const auto msg = profile_error(one(b));
    CAPTURE(msg);
    CHECK(contains(msg, "profile.layers[0].bytes"));
    CHECK(contains(msg, "an integer in [0, 2^50]"));
  }
  // The total stays representable.
  std::string many = R"({"forward_s": 0, "layers": [)";
  for (int k = 0; k < 10; ++k)
    many += std::string(k ? "," : "") + R"({"bytes": 1e15, "backward_s": 0})";
  CHECK(contains(profile_error(many + "]}"), "a total of at most 2^53"));
}

TEST_CASE("profile json: times, names and structure") {
  CHECK(
      contains(profile_error(R"({"forward_s": "0.1", "layers": [{"bytes": 1, "backward_s": 0}]})"),
               "profile.forward_s"));
  CHECK(contains(profile_error(R"({"forward_s": 1e7, "layers": [{"bytes": 1, "backward_s": 0}]})"),
                 "profile.forward_s"));
  CHECK(contains(profile_error(R"({"forward_s": 0, "layers": [{"bytes": 1, "backward_s": -1}]})"),
                 "profile.layers[0].backward_s"));
  CHECK(contains(profile_error(R"({"forward_s": 0, "layers": [{"bytes": 1, "backward_s": []}]})"),
                 "profile.layers[0].backward_s"));
  CHECK(contains(
      profile_error(R"({"name": 7, "forward_s": 0, "layers": [{"bytes": 1, "backward_s": 0}]})"),
      "profile.name"));
  CHECK(contains(
      profile_error(R"({"forward_s": 0, "layers": [{"name": {}, "bytes": 1, "backward_s": 0}]})"),
      "profile.layers[0].name"));
  CHECK(contains(profile_error("[1, 2]"), "a JSON object"));
  CHECK(contains(profile_error("{\"forward_s\": "), "valid JSON"));
}

// ---------------------------------------------------------------------------------------------
// Inputs the fuzzers (fuzz/) found against the loaders before these checks.

TEST_CASE("fuzz regression: an unknown node kind is a TopologyError") {
  // fuzz_topology_json: parse_node_kind's std::invalid_argument escaped the loader.
  const auto msg = json_error(R"({"nodes": [{"id": "gpu0", "kind": "g[u"}]})");
  CHECK(contains(msg, "\"kind\" must be gpu, cpu, nic or switch, got \"g[u\""));
}

TEST_CASE("fuzz regression: a link count of 1e12 is not converted to int") {
  // fuzz_topology_json: UBSan "1e+12 is outside the range of representable values of type 'int'".
  CHECK(contains(json_error(R"({"nodes": ["a", "b"], "links": [{"a": "a", "b": "b",
                               "bandwidth_GBps": 1, "count": 1e12}]})"),
                 "count"));
}

TEST_CASE("fuzz regression: deeply nested JSON values are described, never dumped") {
  // fuzz_topology_json / fuzz_profile_json: the error message dumped the value recursively
  // (stack overflow in nlohmann's serializer at 30,000 levels).
  const std::string deep = std::string(30000, '[') + std::string(30000, ']');
  const auto t = json_error(R"({"nodes": [)" + deep + "]}");
  CHECK(contains(t, "an array of 1 elements"));
  const auto p = profile_error(R"({"forward_s": 0, "layers": [)" + deep + "]}");
  CHECK(contains(p, "profile.layers[0]"));
}

TEST_CASE("fuzz regression: a profile name that is not a string is a ccoll::Error") {
  // fuzz_profile_json: nlohmann's type_error.302 escaped profile_from_json.
  CHECK(contains(profile_error(R"({"name":1e12, "forward_s": 0.01, "layers": [{"name": "w",
                   "bttes": 4096, "backward_s": 0.001}, {"bytes": 1e12, "backward_s": 0}]})"),
                 "profile.name"));
}

TEST_CASE("fuzz regression: a 20,000-device nvidia-smi header does not allocate its square") {
  // fuzz_nvidia_smi: the relation matrix was allocated before any row was read (out of memory).
  std::string header = "GPU0";
  for (int k = 1; k < 20000; ++k) header += " GPU" + std::to_string(k);
  CHECK(contains(smi_error(header + "\n"), "more than 256"));
}

// ---------------------------------------------------------------------------------------------
// Review regressions.

TEST_CASE("nvidia-smi: the underlined header of a real capture (escape sequences) loads") {
  // nvidia-smi writes "\x1b[4m" ... "\x1b[0m" around the header even into a file; only the ESC
  // was dropped, "[4mGPU0" hid the header and the GPU0 row was taken for it ("expected a row
  // for GPU0, got GPU1").
  const std::string text =
      "\t\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
      "GPU0\t X \tNV12\tPXB\t0-63\t0\t\tN/A\n"
      "GPU1\tNV12\t X \tSYS\t64-127\t1\t\tN/A\n"
      "NIC0\tPXB\tSYS\t X \t\t\t\t\n";
  const auto t = topology_from_nvidia_smi(text);
  CHECK(t.gpus().size() == 2);
  CHECK(t.find("nic0") >= 0);
  CHECK(t.direct_capacity_GBps(t.require("gpu0"), t.require("gpu1")) == doctest::Approx(300));
  // The GPUs' NUMA column still counts: two CPUs.
  CHECK(t.find("cpu1") >= 0);
  // An escape left open at the end of a line ends its token.
  CHECK(
      topology_from_nvidia_smi("\x1b[4mGPU0\tCPU Affinity\x1b[0\nGPU0\t X \t0-7\n").gpus().size() ==
      1);
}

TEST_CASE("nccl xml: two GPUs on one bus id are refused (NVLinks found the wrong peer)") {
  // A third GPU on gpu1's bus id took over gpu1's entry: gpu0's NVLinks went to gpu2, silently.
  std::string text = dump();
  text =
      with_attr(text, "<nic>", "<pci busid=\"0000:02:00.0\"><gpu dev=\"2\" sm=\"80\"/></pci><nic>");
  const auto msg = xml_error(text);
  CAPTURE(msg);
  CHECK(contains(msg, "gpu2 has the bus id \"0000:02:00.0\" of gpu1"));
  // The same id in another case is the same bus.
  CHECK(contains(xml_error(with_attr(dump(), "<nic>",
                                     "<pci busid=\"0000:0A:00.0\"><gpu dev=\"2\"/></pci>"
                                     "<pci busid=\"0000:0a:00.0\"><gpu dev=\"3\"/></pci><nic>")),
                 "gpu3 has the bus id"));
  // GPUs without a bus id (no NVLink names them) still load.
  const auto t = topology_from_nccl_xml(
      with_attr(dump(), "<nic>", "<pci><gpu dev=\"2\"/></pci><pci><gpu dev=\"3\"/></pci><nic>"));
  CHECK(t.gpus().size() == 4);
}

TEST_CASE("topology file text: malformed JSON is quoted in part, not whole") {
  // load()'s path (the CLI, ccoll_perf) appended nlohmann's whole message, which quotes the last
  // token in full: a 100,000-character string made a 100,000-character error.
  const std::string text = "{\"name\": \"" + std::string(100000, 'a') + "\x01\"}";
  const auto msg = topology_error([&] { (void)topology_from_file_text(text, "x.json"); });
  CHECK(contains(msg, "x.json: not valid JSON"));
  CHECK(msg.size() < 400);
}

TEST_CASE("topology file text: an empty file is named as empty, not read as nvidia-smi's text") {
  for (const char* text : {"", " \n\t\r\n"}) {
    const auto msg = topology_error([&] { (void)topology_from_file_text(text, "t.json"); });
    CHECK(contains(msg, "t.json: empty"));
  }
  // A file without "name" is named after itself, in its validation's errors too.
  const auto msg = topology_error([] {
    (void)topology_from_file_text(R"({"nodes": [{"id": "c", "kind": "cpu"}]})", "dir/t.json");
  });
  CHECK(contains(msg, "topology \"t.json\" has no active node"));
}

TEST_CASE("presets: numbers past an int and graphs past the size limits are refused") {
  // preset()'s parser wrapped: ring:4294967300 was a ring of 4 GPUs, full4294967298 a pair.
  for (const char* name :
       {"ring:4294967300", "full4294967298", "cluster:4294967297x2", "cluster:2x4:34359738376",
        "torus:4294967298x2", "ring:99999999999999999999"}) {
    CAPTURE(name);
    CHECK(contains(topology_error([&] { (void)preset(name); }), "above 1048576"));
  }
  // Within the parser's range but too large to build (hours of links, or memory).
  CHECK(contains(topology_error([&] { (void)preset("full100000"); }), "at most 2048"));
  CHECK(contains(topology_error([&] { (void)gpu_ring(1048577); }), "from 2 to 1048576"));
  CHECK(contains(topology_error([&] { (void)preset("cluster:1048576x2"); }), "at most 1048576"));
  CHECK(contains(topology_error([&] { (void)preset("cluster:64x64:pairwise"); }),
                 "at most 2048 GPUs with pairwise"));
  ClusterOptions o;
  o.machines = 65536;
  o.gpus_per_machine = 65537;  // the product wraps an int to 65536
  CHECK(contains(topology_error([&] { (void)cluster(o); }), "65536 x 65537"));
  CHECK(preset("cluster:2x4:pairwise").node_count() == 8);
}
}  // namespace loaders_test
