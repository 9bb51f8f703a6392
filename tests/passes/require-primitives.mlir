// RUN: not kiln opt %s --pass require-primitives --split-input-file 2>&1 | filecheck %s

// Only primitives, and arithmetic on a dynamic size (scalars only): passes through unchanged.
// CHECK-LABEL: func.func @primitives_only
// CHECK:         torch.aten.size.int
// CHECK:         torch.aten.mul.int
// CHECK:         torch.aten.mul.Tensor
// CHECK:         torch.aten.relu
func.func @primitives_only(%x: !torch.vtensor<[?],f32>) -> (!torch.vtensor<[?],f32>, !torch.int) {
  %int0 = torch.constant.int 0
  %size = torch.aten.size.int %x, %int0 : !torch.vtensor<[?],f32>, !torch.int -> !torch.int
  %double = torch.aten.mul.int %size, %size : !torch.int, !torch.int -> !torch.int
  %a = torch.aten.mul.Tensor %x, %x : !torch.vtensor<[?],f32>, !torch.vtensor<[?],f32> -> !torch.vtensor<[?],f32>
  %b = torch.aten.relu %a : !torch.vtensor<[?],f32> -> !torch.vtensor<[?],f32>
  return %b, %double : !torch.vtensor<[?],f32>, !torch.int
}

// -----

// gelu and silu are composites: one error, at the first, naming each with its count.
// CHECK: error: [require-primitives] {{.*}}: 'torch.aten.gelu' op is outside kiln's primitive set; ops outside it: torch.aten.gelu (2), torch.aten.silu (1)
func.func @composites(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %none = torch.constant.str "none"
  %a = torch.aten.gelu %x, %none : !torch.vtensor<[4],f32>, !torch.str -> !torch.vtensor<[4],f32>
  %b = torch.aten.silu %a : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  %c = torch.aten.gelu %b, %none : !torch.vtensor<[4],f32>, !torch.str -> !torch.vtensor<[4],f32>
  return %c : !torch.vtensor<[4],f32>
}
