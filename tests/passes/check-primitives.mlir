// RUN: not kiln opt %s --pass check-primitives --split-input-file --dump-dir %t 2>&1 | filecheck %s
// RUN: filecheck --check-prefix=REPORT %s < %t/check-primitives.1.outside-primitives.txt

// Only primitives, and arithmetic on a dynamic size (scalars only): passes through unchanged, no report.
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

// A vector norm and a gelu are outside the set, but torch-to-linalg lowers them: they stay, and
// the report lists them with their counts.
// CHECK-LABEL: func.func @lowered_outside_the_set
// CHECK:         torch.aten.linalg_vector_norm
// CHECK:         torch.aten.gelu
// REPORT: torch.aten.linalg_vector_norm  1  lowered by torch-to-linalg
// REPORT: torch.aten.gelu  2  lowered by torch-to-linalg
func.func @lowered_outside_the_set(%x: !torch.vtensor<[3,5],f32>) -> !torch.vtensor<[3],f32> {
  %neg1 = torch.constant.int -1
  %dims = torch.prim.ListConstruct %neg1 : (!torch.int) -> !torch.list<int>
  %false = torch.constant.bool false
  %none = torch.constant.none
  %float3 = torch.constant.float 3.0
  %norm = torch.aten.linalg_vector_norm %x, %float3, %dims, %false, %none : !torch.vtensor<[3,5],f32>, !torch.float, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[3],f32>
  %approximate = torch.constant.str "none"
  %a = torch.aten.gelu %norm, %approximate : !torch.vtensor<[3],f32>, !torch.str -> !torch.vtensor<[3],f32>
  %b = torch.aten.gelu %a, %approximate : !torch.vtensor<[3],f32>, !torch.str -> !torch.vtensor<[3],f32>
  return %b : !torch.vtensor<[3],f32>
}

// -----

// erfinv has no lowering: one error, at its first occurrence, naming every such op with its count
// (and not the gelu between them, which lowers).
// CHECK: error: [check-primitives] {{.*}}: 'torch.aten.erfinv' op has no lowering; ops outside kiln's primitive set that nothing lowers: torch.aten.erfinv (2){{$}}
func.func @not_lowered(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %a = torch.aten.erfinv %x : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  %approximate = torch.constant.str "none"
  %b = torch.aten.gelu %a, %approximate : !torch.vtensor<[4],f32>, !torch.str -> !torch.vtensor<[4],f32>
  %c = torch.aten.erfinv %b : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  return %c : !torch.vtensor<[4],f32>
}
