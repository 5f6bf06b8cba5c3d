// A training run's output directory: which directories a new run may write into, and how the
// checkpoint is replaced so that a crash at any instant, even two in a row, leaves a complete
// checkpoint to resume from.
//
// A checkpoint directory is complete when it holds train_state.json: that file is written last
// (after every other file is fsynced) and removed first, so its presence proves the rest is
// there. A save fills checkpoint.tmp, moves checkpoint aside to checkpoint.old and renames
// checkpoint.tmp into place; whichever of the three is complete with the highest step is the
// one to resume from, and the next save first makes that one `checkpoint` again.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace forge::train {

/// Called before each rename or removal a checkpoint save makes, with the operation ("rename",
/// "unlink", "remove_all") and the path it acts on. Tests throw from it to stop a save there,
/// as a crash would.
using FsStepHook = std::function<void(std::string_view op, const std::string& path)>;

/// Refuses `dir` as the output of a new run unless it does not exist or is empty, or `force`:
/// a new run must never mix its files with another model's. Throws forge::Error naming the
/// directory and some of what it holds. Reads only.
void check_new_run_dir(const std::string& dir, bool force);

/// check_new_run_dir(), then with `force` removes the files a run writes (weights, config,
/// vocabulary, checkpoints, log, plots, stale temporaries) and keeps anything else, so old
/// weights are never read with a new vocabulary. The first write of a new run.
void prepare_new_run_dir(const std::string& dir, bool force);

/// Removes `NAME.tmp.<pid>` files (AtomicFileWriter's temporaries) that processes no longer
/// running left in `dir` and its checkpoint directories.
void remove_stale_temporaries(const std::string& dir);

/// The complete checkpoint directory of the run in `out_dir` with the highest step, among
/// checkpoint, checkpoint.tmp and checkpoint.old; nullopt when there is none. A train_state.json
/// that is not JSON with an integer "step" is an error naming it.
std::optional<std::string> find_checkpoint(const std::string& out_dir);

/// The step recorded in `checkpoint_dir`/train_state.json; errors name the file.
int64_t checkpoint_step(const std::string& checkpoint_dir);

/// Replaces out_dir/checkpoint with a new one: `write` fills the (fresh) directory it is given
/// with every file but the state, then `state` goes in as train_state.json and two renames put
/// the directory in place. At every instant find_checkpoint() finds this checkpoint or the
/// previous complete one.
void save_checkpoint(const std::string& out_dir,
                     const std::function<void(const std::string& dir)>& write,
                     const std::string& state, const FsStepHook& hook = {});

}  // namespace forge::train
