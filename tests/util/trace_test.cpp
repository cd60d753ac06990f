// The trace recorder: nothing is recorded while it is off; spans and phases record their
// names, categories, arguments and nesting; the file is valid trace-event JSON; the profile
// sums the parts of forward passes.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "util/trace.h"
#include "util/trace_profile.h"

namespace vela::trace {
namespace {

TEST(Trace, OffRecordsNothing) {
  Recorder r;
  {
    Span s("x", "c");
    EXPECT_FALSE(s.on());
    s.arg("k", 1);
    Phases p("c");
    p.next("a");
    p.next("b");
  }
  EXPECT_TRUE(r.events().empty());
}

TEST(Trace, SpansAndPhasesNestAndWriteValidJson) {
  Recorder r;
  Recorder::install(&r);
  name_this_thread("main");
  {
    Span outer("forward", "forward");
    outer.arg("tokens", 7);
    Phases parts("forward");
    parts.next("prepare");
    parts.done();
    {
      Span layer("layer", "layer");
      layer.arg("layer", 0);
      Phases ops("op");
      ops.next("attention");
      ops.next("ffn_matmul");
    }
    parts.next("output");
  }
  std::thread([] {
    name_this_thread("other");
    Span s("work", "misc");
    s.label("a \"quoted\" detail");
  }).join();
  Recorder::uninstall();
  const std::vector<Event> events = r.events();
  ASSERT_EQ(events.size(), 7u);  // prepare, attention, ffn, layer, output, forward, work
  const Event& forward = events[5];
  EXPECT_STREQ(forward.name, "forward");
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_GE(events[i].begin_ns, forward.begin_ns) << events[i].name;
    EXPECT_LE(events[i].end_ns, forward.end_ns) << events[i].name;
    EXPECT_EQ(events[i].tid, forward.tid);
  }
  EXPECT_NE(events[6].tid, forward.tid);

  const std::string path = testing::TempDir() + "vela_trace_test.json";
  ASSERT_TRUE(r.write_json(path).ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << text.str();
  ASSERT_TRUE(doc["traceEvents"].is_array());
  int complete = 0, names = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M") {
      ++names;
      continue;
    }
    ++complete;
    EXPECT_TRUE(e["ts"].is_number() && e["dur"].is_number() && e["tid"].is_number_integer());
    if (e["name"] == "forward") EXPECT_EQ(e["args"]["tokens"], 7);
    if (e["name"] == "work") EXPECT_EQ(e["args"]["detail"], "a \"quoted\" detail");
  }
  EXPECT_EQ(complete, 7);
  EXPECT_EQ(names, 2);
  std::remove(path.c_str());

  const Profile p = profile_forward(events);
  EXPECT_EQ(p.passes, 1);
  ASSERT_EQ(p.parts.size(), 3u);  // prepare, layer 0, output head
  EXPECT_EQ(p.parts[1].name, "layer 0");
  EXPECT_LE(p.parts_share, 1.0 + 1e-9);
  ASSERT_EQ(p.operations.size(), 2u);
  EXPECT_EQ(p.operations[0].name, "attention");
  EXPECT_NE(format_profile(p).find("| layer 0 |"), std::string::npos);
}

TEST(Trace, EventsBeyondTheCapAreCountedNotKept) {
  Recorder r(3);
  Recorder::install(&r);
  for (int i = 0; i < 5; ++i) Span s("x", "c");
  Recorder::uninstall();
  EXPECT_EQ(r.events().size(), 3u);
  EXPECT_EQ(r.dropped(), 2u);
}

}  // namespace
}  // namespace vela::trace
