// RUN: kiln opt %s --pass decompose-math --split-input-file | filecheck %s

// asinh(x) = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))), negated where x < 0.
// CHECK-LABEL: func.func @asinh
// CHECK:         %[[ABS:.*]] = torch.aten.abs %arg0
// CHECK:         %[[SQUARE:.*]] = torch.aten.mul.Tensor %[[ABS]], %[[ABS]]
// CHECK:         torch.aten.sqrt
// CHECK:         %[[RATIO:.*]] = torch.aten.div.Tensor %[[SQUARE]]
// CHECK:         %[[SUM:.*]] = torch.aten.add.Tensor %[[ABS]], %[[RATIO]]
// CHECK:         %[[LOG:.*]] = torch.aten.log1p %[[SUM]]
// CHECK:         %[[NEGATIVE:.*]] = torch.aten.lt.Scalar %arg0
// CHECK:         %[[MINUS:.*]] = torch.aten.neg %[[LOG]]
// CHECK:         %[[Y:.*]] = torch.aten.where.self %[[NEGATIVE]], %[[MINUS]], %[[LOG]]
// CHECK:         return %[[Y]]
func.func @asinh(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %0 = torch.aten.asinh %x : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// atanh(x) = 0.5 * log1p(2x / (1 - x)); bf16 computed in f32, rounded once.
// CHECK-LABEL: func.func @atanh_bf16
// CHECK:         %[[UP:.*]] = torch.aten.to.dtype %arg0, {{.*}} -> !torch.vtensor<[4],f32>
// CHECK:         %[[ONE_MINUS:.*]] = torch.aten.rsub.Scalar %[[UP]]
// CHECK:         %[[TWICE:.*]] = torch.aten.mul.Scalar %[[UP]], %float2.000000e00
// CHECK:         %[[RATIO:.*]] = torch.aten.div.Tensor %[[TWICE]], %[[ONE_MINUS]]
// CHECK:         %[[LOG:.*]] = torch.aten.log1p %[[RATIO]]
// CHECK:         %[[HALF:.*]] = torch.aten.mul.Scalar %[[LOG]], %float5.000000e-01
// CHECK:         %[[DOWN:.*]] = torch.aten.to.dtype %[[HALF]], {{.*}} -> !torch.vtensor<[4],bf16>
// CHECK:         return %[[DOWN]]
func.func @atanh_bf16(%x: !torch.vtensor<[4],bf16>) -> !torch.vtensor<[4],bf16> {
  %0 = torch.aten.atanh %x : !torch.vtensor<[4],bf16> -> !torch.vtensor<[4],bf16>
  return %0 : !torch.vtensor<[4],bf16>
}

// -----

// acosh of an integer tensor: converted to the f32 result first.
// CHECK-LABEL: func.func @acosh_of_int
// CHECK:         %[[UP:.*]] = torch.aten.to.dtype %arg0, {{.*}} -> !torch.vtensor<[4],f32>
// CHECK:         %[[BELOW:.*]] = torch.aten.add.Scalar %[[UP]], %float-1.000000e00
// CHECK:         %[[ABOVE:.*]] = torch.aten.add.Scalar %[[UP]], %float1.000000e00
// CHECK:         %[[PRODUCT:.*]] = torch.aten.mul.Tensor %[[BELOW]], %[[ABOVE]]
// CHECK:         %[[ROOT:.*]] = torch.aten.sqrt %[[PRODUCT]]
// CHECK:         %[[SUM:.*]] = torch.aten.add.Tensor %[[BELOW]], %[[ROOT]]
// CHECK:         %[[Y:.*]] = torch.aten.log1p %[[SUM]]
// CHECK:         return %[[Y]]
func.func @acosh_of_int(%x: !torch.vtensor<[4],si64>) -> !torch.vtensor<[4],f32> {
  %0 = torch.aten.acosh %x : !torch.vtensor<[4],si64> -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// log10(x) = log(x) * (1 / ln 10): IREE's llvm-cpu backend has no log10f to link.
// CHECK-LABEL: func.func @log10
// CHECK:         %[[LOG:.*]] = torch.aten.log %arg0
// CHECK:         %[[Y:.*]] = torch.aten.mul.Scalar %[[LOG]], %float4.342940e-01
// CHECK:         return %[[Y]]
func.func @log10(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %0 = torch.aten.log10 %x : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// isfinite: |x| < inf for floats (NaN compares false); integers are all finite.
// CHECK-LABEL: func.func @isfinite
// CHECK-DAG:     %[[ALL:.*]] = torch.vtensor.literal(dense<true> : tensor<4xi1>)
// CHECK-DAG:     %[[INF:.*]] = torch.constant.float 0x7FF0000000000000
// CHECK:         %[[ABS:.*]] = torch.aten.abs %arg0
// CHECK:         %[[FINITE:.*]] = torch.aten.lt.Scalar %[[ABS]], %[[INF]]
// CHECK:         return %[[FINITE]], %[[ALL]]
func.func @isfinite(%x: !torch.vtensor<[4],f32>, %i: !torch.vtensor<[4],si64>) -> (!torch.vtensor<[4],i1>, !torch.vtensor<[4],i1>) {
  %0 = torch.aten.isfinite %x : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],i1>
  %1 = torch.aten.isfinite %i : !torch.vtensor<[4],si64> -> !torch.vtensor<[4],i1>
  return %0, %1 : !torch.vtensor<[4],i1>, !torch.vtensor<[4],i1>
}

// -----

// isclose, PyTorch's definition: a == b, or both NaN (equal_nan, NaN as the value unequal to itself), or a finite |a - b| within
// atol + |rtol * b|.
// CHECK-LABEL: func.func @isclose
// CHECK:         %[[EQUAL:.*]] = torch.aten.eq.Tensor %arg0, %arg1
// CHECK:         %[[NAN_A:.*]] = torch.aten.ne.Tensor %arg0, %arg0
// CHECK:         %[[NAN_B:.*]] = torch.aten.ne.Tensor %arg1, %arg1
// CHECK:         %[[BOTH_NAN:.*]] = torch.aten.logical_and %[[NAN_A]], %[[NAN_B]]
// CHECK:         %[[SAME:.*]] = torch.aten.logical_or %[[EQUAL]], %[[BOTH_NAN]]
// CHECK:         %[[SCALED:.*]] = torch.aten.mul.Scalar %arg1, %float1.000000e-05
// CHECK:         %[[ALLOWED:.*]] = torch.aten.add.Scalar {{.*}}, %float1.000000e-08
// CHECK:         %[[DIFFERENCE:.*]] = torch.aten.sub.Tensor %arg0, %arg1
// CHECK:         %[[ERROR:.*]] = torch.aten.abs %[[DIFFERENCE]]
// CHECK:         %[[FINITE:.*]] = torch.aten.lt.Scalar %[[ERROR]]
// CHECK:         %[[WITHIN:.*]] = torch.aten.le.Tensor %[[ERROR]], %[[ALLOWED]]
// CHECK:         %[[NEAR:.*]] = torch.aten.logical_and %[[FINITE]], %[[WITHIN]]
// CHECK:         %[[Y:.*]] = torch.aten.logical_or %[[SAME]], %[[NEAR]]
// CHECK:         return %[[Y]]
func.func @isclose(%a: !torch.vtensor<[4],f32>, %b: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],i1> {
  %rtol = torch.constant.float 1.000000e-05
  %atol = torch.constant.float 1.000000e-08
  %true = torch.constant.bool true
  %0 = torch.aten.isclose %a, %b, %rtol, %atol, %true : !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>, !torch.float, !torch.float, !torch.bool -> !torch.vtensor<[4],i1>
  return %0 : !torch.vtensor<[4],i1>
}

// -----

// Must not fire: isclose of operands that broadcast (left whole for check-primitives to name).
// CHECK-LABEL: func.func @isclose_broadcast
// CHECK:         torch.aten.isclose
func.func @isclose_broadcast(%a: !torch.vtensor<[4],f32>, %b: !torch.vtensor<[1],f32>) -> !torch.vtensor<[4],i1> {
  %rtol = torch.constant.float 1.000000e-05
  %atol = torch.constant.float 1.000000e-08
  %false = torch.constant.bool false
  %0 = torch.aten.isclose %a, %b, %rtol, %atol, %false : !torch.vtensor<[4],f32>, !torch.vtensor<[1],f32>, !torch.float, !torch.float, !torch.bool -> !torch.vtensor<[4],i1>
  return %0 : !torch.vtensor<[4],i1>
}
