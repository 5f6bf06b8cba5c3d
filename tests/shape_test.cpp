// Shapes whose sizes multiply past int64 are clear errors, a zero among them included: such a
// tensor holds no elements, but its strides would still multiply the other sizes (a compact
// file with the shape [0, 97, 1153156986523615234] found this under UBSan).
#include <gtest/gtest.h>

#include "forge/core/tensor.h"
#include "test_support.h"

namespace forge {
namespace {

using test::expect_error;

TEST(Shape, NumelCountsElementsAndAZeroLeavesNone) {
  EXPECT_EQ((Shape{2, 3, 4}).numel(), 24);
  EXPECT_EQ((Shape{}).numel(), 1);
  EXPECT_EQ((Shape{5, 0, 7}).numel(), 0);
}

TEST(Shape, SizesWhoseProductOverflowsAreAClearErrorEvenBesideAZero) {
  expect_error(
      [] {
        (Shape{0, 97, 1153156986523615234}).numel();
      },
      "shape [0, 97, 1153156986523615234] is too large");
  expect_error([] { (Shape{int64_t{1} << 32, int64_t{1} << 32}).numel(); }, "is too large");
  expect_error(
      [] {
        Tensor::empty(Shape{0, 97, 1153156986523615234}, DType::F32, Device::cpu());
      },
      "is too large");
  expect_error([] { Tensor::empty(Shape{int64_t{1} << 62}, DType::F32, Device::cpu()); },
               "its bytes overflow");
  EXPECT_EQ(Tensor::empty(Shape{0, 1 << 20, 1 << 20}, DType::F32, Device::cpu()).numel(), 0);
}

}  // namespace
}  // namespace forge
