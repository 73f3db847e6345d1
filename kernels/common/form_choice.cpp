#include "kernels/common/form_choice.h"

#include "kernels/common/form_store.h"

#include <chrono>
#include <map>
#include <mutex>
#include <set>

namespace fwlab::kernels {

namespace {

struct Choices {
  std::mutex mutex;
  std::string pinned = "auto";
  std::function<void(const FormChoice&)> listener;
  std::map<std::string, std::string> decided;  // shape class -> form
  std::string store;                           // form_store.h's file, or ""
  std::set<std::string> announced;             // classes the listener has heard of
};

Choices& choices() {
  static Choices c;
  return c;
}

}  // namespace

void on_form_choice(std::function<void(const FormChoice&)> listener) {
  const std::lock_guard<std::mutex> lock(choices().mutex);
  choices().listener = std::move(listener);
}

void pin_form(const std::string& form) {
  TORCH_CHECK(form == "auto" || form == "fused" || form == "chunked", "pin_form: unknown form '", form, "'");
  const std::lock_guard<std::mutex> lock(choices().mutex);
  choices().pinned = form;
}

void reset_form_choices() {
  const std::lock_guard<std::mutex> lock(choices().mutex);
  choices().decided.clear();
  choices().announced.clear();
}

void keep_form_choices_in(const std::string& path) {
  const auto stored = path.empty() ? std::map<std::string, std::string>() : read_form_store(path);
  const std::lock_guard<std::mutex> lock(choices().mutex);
  choices().store = path;
  for (const auto& [shape, form] : stored) choices().decided[shape] = form;
}

std::map<std::string, std::string> form_choices() {
  const std::lock_guard<std::mutex> lock(choices().mutex);
  return choices().decided;
}

void restore_form_choices(const std::map<std::string, std::string>& decided) {
  const std::lock_guard<std::mutex> lock(choices().mutex);
  for (const auto& [shape, form] : decided) choices().decided[shape] = form;
}

double race_ms(const std::function<RecurrenceResult()>& run, bool backward) {
  auto once = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run();
    if (backward) r.y.sum().backward();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  once();
  return std::min(once(), once());
}

RecurrenceResult run_chosen_form(const std::string& family, const std::string& key, const std::string& chunked,
                                 const std::function<FormChoice()>& race_now,
                                 const std::function<RecurrenceResult(const std::string&)>& run) {
  auto& c = choices();
  std::unique_lock<std::mutex> lock(c.mutex);
  if (c.pinned != "auto") {
    const auto form = c.pinned == "fused" ? std::string("fused") : chunked;
    lock.unlock();
    return run(form);
  }
  if (const auto it = c.decided.find(key); it != c.decided.end()) {
    const auto form = it->second;
    const bool first_use = c.announced.insert(key).second;
    const auto listener = c.listener;
    lock.unlock();
    if (first_use && listener) listener({family, key, form, {}});  // kept or restored: no times
    return run(form);
  }
  const auto store = c.store;
  lock.unlock();
  auto choice = race_now();
  choice.family = family;
  // Another process may have decided the class meanwhile: its decision stands, for this process too.
  if (!store.empty()) choice.chosen = add_to_form_store(store, key, choice.chosen);
  lock.lock();
  c.decided.emplace(key, choice.chosen);
  c.announced.insert(key);
  const auto listener = c.listener;
  lock.unlock();
  if (listener) listener(choice);
  return run(choice.chosen);
}

}  // namespace fwlab::kernels
