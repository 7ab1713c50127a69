// What passes between stages: a stage's output reduced over its last axis (argmax, or a draw at
// a temperature) with the confidence that gates later stages, and the rows of a batch-major
// tensor taken for the inputs a stage runs on and put back among those it skipped.
#pragma once
#include <cstdint>
#include <vector>

#include "mminfer/tensor.h"

namespace mminfer::staged {

// int64 [N, ...]: the index of the largest value along the last axis of float32 [N, ..., C].
Tensor argmax_last(const Tensor& logits);
// int64 [N, ...]: one draw per row from softmax(logits / temperature). Input n's draws depend
// only on (seed, item_ids[n], stream), never on which other inputs share its batch.
Tensor sample_last(const Tensor& logits, double temperature, uint64_t seed, const std::vector<uint64_t>& item_ids,
                   uint64_t stream);
// Per input n: the smallest over its rows of the largest softmax probability (at temperature 1).
std::vector<double> confidence(const Tensor& logits);

// [items.size(), ...]: rows `items` of batch-major `t`, in that order.
Tensor take_rows(const Tensor& t, const std::vector<size_t>& items);
// `rows` is [items.size(), ...]: row k goes to row items[k] of `dst` (same dtype and row shape).
void put_rows(Tensor& dst, const Tensor& rows, const std::vector<size_t>& items);
// [n, ...row.shape]: `row` repeated n times.
Tensor repeat_row(const Tensor& row, int64_t n);
// `t` as `want` (int64 to int32 or float32, float32 as is); throws Error for other casts.
Tensor cast_for_input(const Tensor& t, DType want, const std::string& what);

}  // namespace mminfer::staged
