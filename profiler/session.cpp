#include "profiler/session.h"


#include <algorithm>
#include <iterator>
#include <vector>

#include "profiler/scope.h"
#include "runtime/error.h"
#include "runtime/interrupt.h"

#ifdef BLOCKSCOPE_WITH_CUPTI
#include "profiler/cupti.h"
#endif

namespace blockscope::profiler {

namespace {

// Moves the recorder's events of one step into the profile: op indices (parents, the kernels'
// op) are shifted by the number of events already kept.
void keep_events(const Recorder& recorder, Profile* profile) {
  const int offset = static_cast<int>(profile->ops.size());
  for (OpEvent event : recorder.ops()) {
    if (event.parent >= 0) event.parent += offset;
    profile->ops.push_back(std::move(event));
  }
  for (KernelEvent kernel : recorder.kernels()) {
    if (kernel.op >= 0) kernel.op += offset;
    profile->kernels.push_back(std::move(kernel));
  }
}

Profile profile_header(Context& ctx, const std::string& label);
void set_dtype_and_peaks(Context& ctx, Profile* profile);

}  // namespace

Profile profile_steps(Context& ctx, const std::string& label, const Schedule& schedule,
                      const std::function<void(int step)>& step, const std::function<void(int done, int total)>& on_step) {
  BS_CHECK_INPUT(schedule.wait >= 0 && schedule.warmup >= 0 && schedule.active >= 0,
                 "profile schedule: wait, warmup and active must not be negative (got wait=", schedule.wait,
                 ", warmup=", schedule.warmup, ", active=", schedule.active, ")");
  BS_CHECK_INPUT(schedule.active > 0 || schedule.keep_cold_step,
                 "profile schedule: active must be at least 1 (nothing would be kept)");

  Profile profile = profile_header(ctx, label);
  profile.schedule = schedule;

  Recorder recorder(ctx);
  RecorderAttachment restore(ctx);  // whatever was attached before comes back, also on a throw
#ifdef BLOCKSCOPE_WITH_CUPTI
  CuptiKernelNames cupti_names(ctx);  // real names for library kernels (not run on a GPU here)
#endif

  // Phases in order: the cold step (kept when asked for), wait (detached), warmup (recorded,
  // dropped), active (kept).
  const int cold = schedule.keep_cold_step ? 1 : 0;
  const int total = cold + schedule.wait + schedule.warmup + schedule.active;
  for (int index = 0; index < total; ++index) {
    // The message is built only once a signal has arrived: this runs every step.
    if (interrupt_signal() != 0) check_interrupted(("before profiled step " + std::to_string(index)).c_str());
    const bool is_cold = index < cold;
    const bool waiting = !is_cold && index < cold + schedule.wait;
    const bool warming = !is_cold && !waiting && index < cold + schedule.wait + schedule.warmup;
    const bool keep = is_cold || (!waiting && !warming);

    ctx.set_recorder(waiting ? nullptr : &recorder);
    recorder.set_step(index);
    {
      // A region per step, also while waiting: its NVTX range lets
      // `nsys --capture-range=nvtx --nvtx-capture="step 3@blockscope"` pick steps.
      RegionScope step_region(ctx, "step " + std::to_string(index));
      step(index);
    }
    ctx.set_recorder(nullptr);
    if (waiting) {
      ctx.synchronize();
      if (on_step) on_step(index + 1, total);
      continue;
    }
    recorder.resolve();  // synchronises: every device time of this step is known
#ifdef BLOCKSCOPE_WITH_CUPTI
    cupti_names.attach(recorder);
#endif
    if (keep) {
      keep_events(recorder, &profile);
      profile.active_steps += 1;
    }
    recorder.clear();
    if (on_step) on_step(index + 1, total);
  }

  set_dtype_and_peaks(ctx, &profile);
  return profile;
}

namespace {

// Everything but the events: the label, the device and how it is described.
Profile profile_header(Context& ctx, const std::string& label) {
  Profile profile;
  profile.label = label;
  profile.device = ctx.device().str();
  const BackendInfo device_info = ctx.backend().info(DType::f32);
  profile.device_name = device_info.description;
  profile.simulated = device_info.simulated;
  profile.cpu_threads = device_info.cpu_threads;
  profile.device_properties = device_info.device_properties;
  return profile;
}

// The profiled dtype and the peaks the % of peak columns divide by.
void set_dtype_and_peaks(Context& ctx, Profile* profile_out) {
  Profile& profile = *profile_out;
  // The profiled dtype is the one most ops ran in (regions carry none).
  int dtype_counts[std::size(kDTypes)] = {};
  for (const OpEvent& event : profile.ops) {
    if (!event.is_region && !event.input_shapes.empty()) dtype_counts[static_cast<int>(event.dtype)] += 1;
  }
  const int most = static_cast<int>(std::max_element(std::begin(dtype_counts), std::end(dtype_counts)) - dtype_counts);
  const DType dtype = dtype_counts[most] > 0 ? static_cast<DType>(most) : DType::f32;
  profile.dtype = dtype_name(dtype);
  profile.peaks = device_peaks(ctx, dtype);
}

}  // namespace

StepRecording::StepRecording(Context& ctx, const std::string& label)
    : ctx_(ctx), recorder_(ctx), previous_(ctx.recorder()), profile_(profile_header(ctx, label)) {
  profile_.schedule = Schedule{0, 0, 1, false};
  ctx_.set_recorder(&recorder_);
  recorder_.set_step(0);
  step_.emplace(ctx_, "step 0");
}

StepRecording::~StepRecording() {
  step_.reset();
  ctx_.set_recorder(previous_);
}

Profile StepRecording::finish() {
  BS_CHECK(step_.has_value(), "a step recording finishes once");
  step_.reset();
  ctx_.set_recorder(previous_);
  recorder_.resolve();  // synchronises: every device time of the step is known
  keep_events(recorder_, &profile_);
  profile_.active_steps = 1;
  set_dtype_and_peaks(ctx_, &profile_);
  return std::move(profile_);
}

Peaks device_peaks(Context& ctx, DType dtype) {
  const BackendInfo info = ctx.backend().info(dtype);
  return Peaks{info.peak_tflops, info.peak_gbps, info.peak_source, info.peaks_cached};
}

}  // namespace blockscope::profiler
