#include "app.h"

#include <curses.h>
#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "generation.h"
#include "layout.h"
#include "metrics.h"
#include "model_pane.h"
#include "run_dashboard.h"
#include "scanner.h"

namespace forge::top {
namespace {

enum class Tab { Models, Run };

constexpr int kStatusLines = 2;
constexpr int kFrameMs = 66;  // ~15 redraws a second
constexpr int kEscape = 27;
const char* const kBackends[] = {"cpu", "webgpu", "auto"};

struct App {
  explicit App(const TopOptions& o) : options(o), scanner(o.paths) {
    models.backend = o.backend;
    models.prompt = o.prompt;
    if (!o.run_dir.empty()) {
      run = std::make_unique<RunFollower>(o.run_dir);
      tab = Tab::Run;
    }
  }

  TopOptions options;
  ModelScanner scanner;
  GenerationWorker worker;
  MetricsSampler metrics;
  std::unique_ptr<RunFollower> run;
  Tab tab = Tab::Models;
  ModelsTab models;
  std::vector<ScanEntry> entries;

  const ScanEntry* selected() const {
    return models.selected < entries.size() ? &entries[models.selected] : nullptr;
  }

  void draw(const Screen& screen) {
    erase();
    const int rows = screen.rows(), cols = screen.cols();
    if (rows < kMinRows || cols < kMinCols) {
      put(0, 0, fmt::format("window too small: {}x{}", cols, rows), cols, Ink::Bad);
      put(1, 0, fmt::format("forge top needs {}x{}", kMinCols, kMinRows), cols);
      put(2, 0, "q quits", cols, Ink::Dim);
      refresh();
      return;
    }
    put(0, 0, " forge top ", 11, Ink::Title);
    put(0, 12, "[1] models", 10, tab == Tab::Models ? Ink::Selected : Ink::Normal);
    put(0, 24, "[2] run", 7, tab == Tab::Run ? Ink::Selected : Ink::Normal);
    put(0, 33, fmt::format("{}x{}", cols, rows), 9, Ink::Dim);
    if (tab == Tab::Models) {
      const auto [left, right] = split_panes(rows, cols, kStatusLines, 0.38, 0.35);
      draw_model_list(entries, !scanner.done(), models, left);
      draw_model_detail(selected(), models, worker.view(), right);
      put(rows - 2, 0,
          models.editing_prompt
              ? "typing the prompt: Enter generates, Esc stops editing"
              : "up/down select  Enter generate  c cancel  p prompt  b backend  t tensors  "
                "r follow run  Tab switch  q quit",
          cols, Ink::Dim);
    } else {
      const Rect area{1, 0, rows - 1 - kStatusLines, cols};
      if (run) {
        draw_run(run->view(), area);
      } else {
        const Rect in = frame(area, "run");
        put(in.y, in.x, "no run followed: forge top --run DIR, or r on a model a run wrote", in.w,
            Ink::Dim);
      }
      put(rows - 2, 0, "Tab switch  q quit", cols, Ink::Dim);
    }
    draw_metrics(metrics.sample(), rows - 1, cols);
    refresh();
  }

  void generate() {
    const ScanEntry* e = selected();
    if (!e || !e->summary) return;
    GenerationRequest request;
    request.model_dir = e->dir;
    request.backend = models.backend;
    request.prompt = models.prompt;
    request.max_tokens = options.max_tokens;
    worker.start(std::move(request));
  }

  void edit_prompt(int key) {
    if (key == '\n' || key == KEY_ENTER) {
      models.editing_prompt = false;
      generate();
    } else if (key == kEscape) {
      models.editing_prompt = false;
    } else if (key == KEY_BACKSPACE || key == 127 || key == 8) {
      while (!models.prompt.empty() &&
             (static_cast<unsigned char>(models.prompt.back()) & 0xC0) == 0x80)
        models.prompt.pop_back();
      if (!models.prompt.empty()) models.prompt.pop_back();
    } else if (key >= 32 && key < 256 && key != 127) {
      models.prompt += static_cast<char>(key);
    }
  }

  /// False when the user quits.
  bool handle(int key) {
    if (key == ERR || key == KEY_RESIZE) return true;
    if (tab == Tab::Models && models.editing_prompt) {
      edit_prompt(key);
      return true;
    }
    switch (key) {
      case 'q':
        return false;
      case '\t':
        tab = tab == Tab::Models ? Tab::Run : Tab::Models;
        return true;
      case '1':
        tab = Tab::Models;
        return true;
      case '2':
        tab = Tab::Run;
        return true;
      default:
        break;
    }
    if (tab != Tab::Models) return true;
    switch (key) {
      case KEY_UP:
      case 'k':
        if (models.selected > 0) --models.selected, models.tensor_scroll = 0;
        break;
      case KEY_DOWN:
      case 'j':
        if (models.selected + 1 < entries.size()) ++models.selected, models.tensor_scroll = 0;
        break;
      case KEY_NPAGE:
        models.tensor_scroll += 5;
        break;
      case KEY_PPAGE:
        models.tensor_scroll = models.tensor_scroll > 5 ? models.tensor_scroll - 5 : 0;
        break;
      case '\n':
      case KEY_ENTER:
      case 'g':
        generate();
        break;
      case 'c':
      case kEscape:
        worker.cancel();
        break;
      case 't':
        models.show_tensors = !models.show_tensors;
        break;
      case 'p':
        models.editing_prompt = true;
        break;
      case 'b': {
        size_t i = 0;
        while (i < 3 && models.backend != kBackends[i]) ++i;
        models.backend = kBackends[(i + 1) % 3];
        break;
      }
      case 'r':
        if (const ScanEntry* e = selected();
            e && std::filesystem::exists(e->dir + "/train_log.csv")) {
          run = std::make_unique<RunFollower>(e->dir);
          tab = Tab::Run;
        }
        break;
      default:
        break;
    }
    return true;
  }
};

}  // namespace

void run_top(const TopOptions& options) {
  App app(options);
  const Screen screen;  // declared last: the terminal is restored before the threads are joined
  set_escdelay(25);
  do {
    app.entries = app.scanner.entries();
    if (app.models.selected >= app.entries.size() && !app.entries.empty())
      app.models.selected = app.entries.size() - 1;
    app.draw(screen);
  } while (app.handle(screen.key(kFrameMs)));
}

}  // namespace forge::top
