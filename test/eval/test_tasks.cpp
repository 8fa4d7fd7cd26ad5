// Task files in their public formats -> the requests lm-evaluation-harness
// would score, and the errors for malformed lines.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "prism/error.h"
#include "prism/eval/tasks.h"
#include "support.h"

using namespace prism;
using prism::test::source_path;
using prism::test::TempDir;
using prism::test::write_file;

namespace {
std::string fixture(const std::string& name) { return source_path("test/fixtures/" + name); }
}  // namespace

TEST_CASE("tasks: HellaSwag context, endings and clean-up as the harness does them", "[eval][tasks]") {
  TaskData d = read_task(Task::HellaSwag, fixture("hellaswag.jsonl"));
  REQUIRE(d.items.size() == 5);
  const TaskItem& a = d.items[0];
  REQUIRE(a.choices.size() == 4);
  CHECK(a.choices[0].context == "Baking bread: A woman kneads dough on a floured table. She");
  CHECK(a.choices[0].continuation == " shapes the dough into a round loaf.");
  CHECK(a.choices[0].choice == "shapes the dough into a round loaf.");
  CHECK(a.label == 0);
  CHECK(a.line == 1);
  CHECK(a.id == "0");
  // " [title]" -> ". ", "[header]" dropped, ctx_b capitalised (and lowered after the first letter).
  CHECK(d.items[2].choices[2].context ==
        "Home and Garden: How to water a plant. Check the soil. Push a finger into the soil");
  CHECK(d.items[3].choices[3].context == "Playing the piano: A girl sits down at a piano. She");
  // Python's str.replace("  ", " ") is one pass: three spaces become two.
  CHECK(d.items[4].choices[1].continuation == " launches  a  weather balloon  quickly.");
  CHECK(hellaswag_preprocess("  a [b] c [title] d  ") == "a c. d");
  CHECK(python_capitalize("sHE went") == "She went");
  CHECK(python_capitalize("") == "");
}

TEST_CASE("tasks: python_strip, python_capitalize and python_len do what Python's str does, for non-ASCII text",
          "[eval][tasks]") {
  // A few of Python 3's answers, written out: full mappings, title case, the final sigma.
  CHECK(python_capitalize("ßtraße ist SCHÖN") == "Sstraße ist schön");
  CHECK(python_capitalize("ǆemal") == "ǅemal");
  CHECK(python_capitalize("ΟΔΟΣ") == "Οδος");
  CHECK(python_capitalize("ΣΑΣ. ΣΑΣ") == "Σας. σας");
  CHECK(python_capitalize("aΣb") == "Aσb");
  CHECK(python_capitalize("ŉ x") == "ʼN x");
  CHECK(python_strip("\xc2\xa0 hello\xe3\x80\x80") == "hello");  // no-break and ideographic spaces
  CHECK(python_strip("\x1c x \x1f") == "x");
  CHECK(python_len("école") == 5);
  CHECK(python_len("ΟΔΟΣ") == 4);
  // Bytes that are not UTF-8 pass through, one character each.
  CHECK(python_capitalize("\xff\xfe" "AB") == "\xff\xfe" "ab");
  CHECK(python_len("a\xff" "b") == 3);
  // And every line of the fixture against Python itself.
  const std::string input = fixture("python_text.jsonl");
  auto r = prism::test::run_reference("eval_reference.py", "text --input " + input);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto expected = nlohmann::json::parse(r.output);
  std::vector<std::string> lines;
  {
    std::istringstream in(prism::test::read_file(input));
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) lines.push_back(nlohmann::json::parse(line).get<std::string>());
  }
  REQUIRE(lines.size() == expected.size());
  REQUIRE(lines.size() >= 25);
  for (size_t i = 0; i < lines.size(); ++i) {
    INFO("line " << i + 1 << ": " << lines[i]);
    CHECK(python_strip(lines[i]) == expected[i]["strip"].get<std::string>());
    CHECK(python_capitalize(lines[i]) == expected[i]["capitalize"].get<std::string>());
    CHECK(python_len(lines[i]) == expected[i]["len"].get<int64_t>());
  }
}

TEST_CASE("tasks: a HellaSwag item in Greek and German gives Python's context and answer lengths", "[eval][tasks]") {
  TaskData d = read_task(Task::HellaSwag, fixture("hellaswag_unicode.jsonl"));
  REQUIRE(d.items.size() == 2);
  // ctx_b "ΟΔΟΣ ΚΑΙ ΣΤΡΑΣΣΕ" capitalised as Python does (final sigma in the first word only).
  CHECK(d.items[0].choices[0].context == "Οδηγός: Ο ΟΔΗΓΌΣ ΠΆΕΙ. Οδος και στρασσε");
  CHECK(d.items[1].choices[0].context == "Straße: Ein Mann geht. Sstrasse");
  CHECK(python_len(d.items[1].choices[1].choice) == 15);
  CHECK(d.items[1].choices[1].choice.size() == 19);  // bytes: four two-byte letters
}

TEST_CASE("tasks: PIQA with its labels file, ARC in both layouts, WinoGrande partial scoring", "[eval][tasks]") {
  TaskReadOptions o;
  o.labels_path = fixture("piqa-labels.lst");
  TaskData piqa = read_task(Task::Piqa, fixture("piqa.jsonl"), o);
  REQUIRE(piqa.items.size() == 4);
  CHECK(piqa.items[0].choices[0].context == "Question: How do you keep cut flowers fresh?\nAnswer:");
  CHECK(piqa.items[0].choices[1].continuation == " Bury them beneath frozen asteroids.");
  CHECK(piqa.items[1].label == 1);

  TaskData arc = read_task(Task::ArcEasy, fixture("arc_easy.jsonl"));
  TaskData hf = read_task(Task::ArcEasy, fixture("arc_easy_hf.jsonl"));
  REQUIRE(arc.items.size() == 4);
  REQUIRE(hf.items.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(arc.items[i].label == hf.items[i].label);
    REQUIRE(arc.items[i].choices.size() == hf.items[i].choices.size());
    for (size_t c = 0; c < arc.items[i].choices.size(); ++c) {
      CHECK(arc.items[i].choices[c].context == hf.items[i].choices[c].context);
      CHECK(arc.items[i].choices[c].continuation == hf.items[i].choices[c].continuation);
    }
  }
  CHECK(arc.items[0].choices[0].context == "Question: Which object gives off its own light?\nAnswer:");
  CHECK(arc.items[0].choices[0].continuation == " the Sun");
  CHECK(arc.items[2].choices.size() == 3);  // numeric labels "1".."3", answerKey "2"
  CHECK(arc.items[2].label == 1);
  CHECK(arc.items[3].label == 3);

  TaskData wg = read_task(Task::WinoGrande, fixture("winogrande.jsonl"));
  REQUIRE(wg.items.size() == 4);
  const TaskItem& w = wg.items[0];
  CHECK(w.choices[0].context == "The cup fell because the cup");
  CHECK(w.choices[1].context == "The cup fell because the Answer");
  CHECK(w.choices[0].continuation == " wobbled on the edge of the table.");
  CHECK(w.choices[1].continuation == w.choices[0].continuation);  // scored on the shared suffix
  CHECK(w.label == 0);
  CHECK(wg.items[1].choices[1].context == "Anna");  // "_" first: the option is the whole context
  CHECK(wg.items[1].label == 1);
}

TEST_CASE("tasks: malformed lines name the file and line, --on-error skip leaves them out", "[eval][tasks]") {
  TempDir dir("prism-tasks");
  const std::string good = R"({"goal": "g", "sol1": "a", "sol2": "b", "label": 1})";
  write_file(dir.file("piqa.jsonl"), good + "\n{\"goal\": \"g\", \"sol1\": \"a\",\n\n" + good + "\n" +
                                         R"({"goal": "g", "sol1": "a", "sol2": "b", "label": 5})" + "\n");
  try {
    read_task(Task::Piqa, dir.file("piqa.jsonl"));
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.where() == dir.file("piqa.jsonl") + ":2");
    CHECK_THAT(e.what(), Catch::Contains("not valid JSON") && Catch::Contains("--on-error skip"));
  }
  TaskReadOptions skip;
  skip.skip_bad = true;
  TaskData d = read_task(Task::Piqa, dir.file("piqa.jsonl"), skip);
  CHECK(d.items.size() == 2);
  CHECK(d.items[1].line == 4);
  REQUIRE(d.skipped.size() == 2);
  CHECK_THAT(d.skipped[0], Catch::Contains("piqa.jsonl:2"));
  CHECK_THAT(d.skipped[1], Catch::Contains(":5: label 5 is out of range for 2 choices"));

  auto error_of = [&](Task task, const std::string& line, const TaskReadOptions& o = {}) {
    write_file(dir.file("t.jsonl"), line + "\n");
    try {
      read_task(task, dir.file("t.jsonl"), o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of(Task::HellaSwag, R"({"ctx": "c", "endings": ["a", "b", "c", "d"], "label": 7})"),
             Catch::Contains("t.jsonl:1") && Catch::Contains("label 7 is out of range for 4 choices"));
  CHECK_THAT(error_of(Task::HellaSwag, R"({"ctx": "c", "endings": ["a", "b"], "label": "x"})"),
             Catch::Contains("not an integer label"));
  CHECK_THAT(error_of(Task::HellaSwag, R"({"ctx": "c", "label": 0})"), Catch::Contains("no field 'endings'"));
  CHECK_THAT(error_of(Task::WinoGrande, R"({"sentence": "a _ b", "option1": "x", "option2": "y", "answer": "3"})"),
             Catch::Contains("answer \"3\" is out of range"));
  CHECK_THAT(error_of(Task::WinoGrande, R"({"sentence": "no blank", "option1": "x", "option2": "y", "answer": "1"})"),
             Catch::Contains("no '_'"));
  CHECK_THAT(error_of(Task::ArcEasy, R"({"question": "q", "choices": {"text": ["a", "b"], "label": ["A", "B"]}, "answerKey": "E"})"),
             Catch::Contains("answerKey 'E' is not one of the choice labels (A, B)"));
  CHECK_THAT(error_of(Task::Piqa, R"({"goal": "g", "sol1": "a", "sol2": "b"})"), Catch::Contains("no label"));
  // A number beyond double's range is nlohmann's out_of_range, not a parse_error: it was let
  // through as a foreign exception (found by the tasks fuzz harness: fuzz/corpus/tasks/).
  CHECK_THAT(error_of(Task::HellaSwag, R"({"ctx": "c", "endings": ["a", "b"], "label": 2671e329})"),
             Catch::Contains("t.jsonl:1") && Catch::Contains("not valid JSON") && Catch::Contains("number overflow"));
  // A labels file that does not belong to the split.
  TaskReadOptions labels;
  labels.labels_path = fixture("piqa-labels.lst");
  CHECK_THAT(error_of(Task::Piqa, R"({"goal": "g", "sol1": "a", "sol2": "b"})", labels),
             Catch::Contains("4 labels for 1 items"));
  CHECK_THROWS_WITH(read_task(Task::Piqa, dir.file("missing.jsonl")), Catch::Contains("docs/analysis.md"));
  CHECK_THROWS_WITH(parse_task("arc_challenge"), Catch::Contains("hellaswag, piqa, arc_easy, winogrande"));
  TaskReadOptions limit;
  limit.limit = 2;
  CHECK(read_task(Task::HellaSwag, fixture("hellaswag.jsonl"), limit).items.size() == 2);
}
