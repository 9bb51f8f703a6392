// RUN: kiln opt %s --pass fold-truncf-constants --split-input-file | filecheck %s

// arange's step, 0.2 as an f64 truncated to f32 on the host: the f32 constant nearest to it.
// CHECK-LABEL: func.func @step
// CHECK-NOT:     arith.truncf
// CHECK:         %[[STEP:.*]] = arith.constant 2.000000e-01 : f32
// CHECK:         return %[[STEP]]
func.func @step() -> f32 {
  %cst = arith.constant 2.000000e-01 : f64
  %0 = arith.truncf %cst : f64 to f32
  return %0 : f32
}

// -----

// Must not fire: a truncation of a computed value, and one to f16.
// CHECK-LABEL: func.func @computed
// CHECK:         arith.truncf %arg0 : f64 to f32
// CHECK:         arith.truncf %cst : f32 to f16
func.func @computed(%x: f64) -> (f32, f16) {
  %0 = arith.truncf %x : f64 to f32
  %cst = arith.constant 1.000000e-01 : f32
  %1 = arith.truncf %cst : f32 to f16
  return %0, %1 : f32, f16
}
