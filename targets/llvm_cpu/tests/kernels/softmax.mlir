// RUN: python -m kiln.targets.llvm_cpu.kernels %s | filecheck %s
// RUN: python -m kiln.targets.llvm_cpu.kernels %s --report | filecheck %s --check-prefix=REPORT
// RUN: python -m kiln.targets.llvm_cpu.kernels %s --attention | filecheck %s --check-prefix=ATTENTION

// Attention's softmax as kiln's linalg has it: scores plus a causal mask shared by batch and heads,
// a max and a sum kept as size-1 dimensions. The division becomes the row softmax with the mask.
// CHECK-LABEL: stream.executable private @kiln_cpu_kernels
// CHECK:         hal.executable.object<{path = "kiln_gemm_bf16.o"}>, #hal.executable.object<{path = "kiln_gemm_amx.o"}>, #hal.executable.object<{path = "kiln_gemm_avx512bf16.o"}>, #hal.executable.object<{path = "kiln_gemm_avx512f.o"}>, #hal.executable.object<{path = "kiln_rows.o"}>
// CHECK:         stream.executable.export public @softmax_f32
// CHECK:         builtin.module
// CHECK:           func.func private @kiln_softmax_f32_workgroup(
// CHECK-LABEL: func.func private @kiln_cpu_softmax_0(
// CHECK-SAME:      %{{.*}}: tensor<2x3x8x16xf32>{{.*}}, %{{.*}}: tensor<8x16xf32>{{.*}}) -> tensor<2x3x8x16xf32>
// CHECK:         tensor.collapse_shape %{{.*}} {{\[\[}}0, 1, 2], [3]] : tensor<2x3x8x16xf32> into tensor<48x16xf32>
// CHECK:         flow.dispatch @kiln_cpu_kernels::@softmax_f32[%{{.*}}](%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<48x16xf32>, tensor<8x16xf32>, index, index, index, index, index, index) -> tensor<48x16xf32>
// CHECK:         tensor.expand_shape
// CHECK-LABEL: func.func @attention_softmax(
// CHECK:         %[[P:.*]] = call @kiln_cpu_softmax_0(%arg0, %arg1)
// CHECK:         return %[[P]]
// REPORT:      | softmax 2x3x8x16 + mask 8x16 | kiln |
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#mask = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#row4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#keep4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
func.func @attention_softmax(%s: tensor<2x3x8x16xf32>, %m: tensor<8x16xf32>) -> tensor<2x3x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e4 = tensor.empty() : tensor<2x3x8x16xf32>
  %x = linalg.generic {indexing_maps = [#id4, #mask, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s, %m : tensor<2x3x8x16xf32>, tensor<8x16xf32>) outs(%e4 : tensor<2x3x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x16xf32>
  %e3 = tensor.empty() : tensor<2x3x8xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%e3 : tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %max = linalg.generic {indexing_maps = [#id4, #row4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x : tensor<2x3x8x16xf32>) outs(%init : tensor<2x3x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8xf32>
  %maxk = tensor.expand_shape %max [[0], [1], [2, 3]] output_shape [2, 3, 8, 1] : tensor<2x3x8xf32> into tensor<2x3x8x1xf32>
  %d = linalg.generic {indexing_maps = [#id4, #keep4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %maxk : tensor<2x3x8x16xf32>, tensor<2x3x8x1xf32>) outs(%e4 : tensor<2x3x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.subf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x16xf32>
  %ex = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%d : tensor<2x3x8x16xf32>) outs(%e4 : tensor<2x3x8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x16xf32>
  %e1 = tensor.empty() : tensor<2x3x8x1xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x3x8x1xf32>) -> tensor<2x3x8x1xf32>
  %sum = linalg.generic {indexing_maps = [#id4, #keep4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<2x3x8x16xf32>) outs(%zeros : tensor<2x3x8x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x1xf32>
  %p = linalg.generic {indexing_maps = [#id4, #keep4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x3x8x16xf32>, tensor<2x3x8x1xf32>) outs(%e4 : tensor<2x3x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x16xf32>
  return %p : tensor<2x3x8x16xf32>
}

// -----

// A softmax without a mask, its max and sum without the size-1 dimension: no bias operand.
// CHECK-LABEL: func.func private @kiln_cpu_softmax_0(
// CHECK-SAME:      %{{.*}}: tensor<4x32xf32>{{.*}}) -> tensor<4x32xf32>
// CHECK:         arith.constant dense<0.000000e+00> : tensor<1xf32>
// CHECK:         flow.dispatch @kiln_cpu_kernels::@softmax_f32{{.*}} : (tensor<4x32xf32>, tensor<1xf32>, index, index, index, index, index, index) -> tensor<4x32xf32>
// CHECK-LABEL: func.func @plain_softmax(
// CHECK:         call @kiln_cpu_softmax_0(%arg0)
// REPORT:      | softmax 4x32 | kiln | {{.*}} row softmax of kiln_rows.c |
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row2 = affine_map<(d0, d1) -> (d0)>
func.func @plain_softmax(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e2 = tensor.empty() : tensor<4x32xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %max = linalg.generic {indexing_maps = [#id2, #row2], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x32xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %d = linalg.generic {indexing_maps = [#id2, #row2, #id2], iterator_types = ["parallel", "parallel"]} ins(%x, %max : tensor<4x32xf32>, tensor<4xf32>) outs(%e2 : tensor<4x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.subf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x32xf32>
  %ex = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%d : tensor<4x32xf32>) outs(%e2 : tensor<4x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4x32xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#id2, #row2], iterator_types = ["parallel", "reduction"]} ins(%ex : tensor<4x32xf32>) outs(%zeros : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %p = linalg.generic {indexing_maps = [#id2, #row2, #id2], iterator_types = ["parallel", "parallel"]} ins(%ex, %sum : tensor<4x32xf32>, tensor<4xf32>) outs(%e2 : tensor<4x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x32xf32>
  return %p : tensor<4x32xf32>
}

// -----

// PyTorch's safe softmax (attention's): a row whose scores are all -inf gives zeros, by a select on
// min(isneginf(scores)) over the row. The kernel gives the zeros (safe = 1), and the select goes;
// nothing then reads the test, which IREE drops.
// CHECK-LABEL: func.func private @kiln_cpu_softmax_0(
// CHECK:         %[[SAFE:.*]] = arith.constant 1 : index
// CHECK:         flow.dispatch @kiln_cpu_kernels::@softmax_f32[%{{.*}}](%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[SAFE]], {{.*}} -> tensor<48x16xf32>
// CHECK-LABEL: func.func @safe_softmax(
// CHECK:         %[[P:.*]] = call @kiln_cpu_softmax_0(%arg0, %arg1)
// CHECK-NOT:     arith.select
// CHECK:         return %[[P]]
// REPORT:      | softmax 2x3x8x16 + mask 8x16 | kiln | {{.*}} row softmax of kiln_rows.c, fully masked rows zeros (safe softmax) |
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#mask = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#row4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#keep4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
func.func @safe_softmax(%s: tensor<2x3x8x16xf32>, %m: tensor<8x16xf32>) -> tensor<2x3x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e4 = tensor.empty() : tensor<2x3x8x16xf32>
  %x = linalg.generic {indexing_maps = [#id4, #mask, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s, %m : tensor<2x3x8x16xf32>, tensor<8x16xf32>) outs(%e4 : tensor<2x3x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x16xf32>
  %e3 = tensor.empty() : tensor<2x3x8xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%e3 : tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %max = linalg.generic {indexing_maps = [#id4, #row4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x : tensor<2x3x8x16xf32>) outs(%init : tensor<2x3x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8xf32>
  %maxk = tensor.expand_shape %max [[0], [1], [2, 3]] output_shape [2, 3, 8, 1] : tensor<2x3x8xf32> into tensor<2x3x8x1xf32>
  %d = linalg.generic {indexing_maps = [#id4, #keep4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %maxk : tensor<2x3x8x16xf32>, tensor<2x3x8x1xf32>) outs(%e4 : tensor<2x3x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.subf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x16xf32>
  %ex = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%d : tensor<2x3x8x16xf32>) outs(%e4 : tensor<2x3x8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x16xf32>
  %e1 = tensor.empty() : tensor<2x3x8x1xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x3x8x1xf32>) -> tensor<2x3x8x1xf32>
  %sum = linalg.generic {indexing_maps = [#id4, #keep4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<2x3x8x16xf32>) outs(%zeros : tensor<2x3x8x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x1xf32>
  %p = linalg.generic {indexing_maps = [#id4, #keep4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x3x8x16xf32>, tensor<2x3x8x1xf32>) outs(%e4 : tensor<2x3x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x16xf32>
  %ninf64 = arith.constant 0xFFF0000000000000 : f64
  %inf = arith.constant 0x7F800000 : f32
  %flags = linalg.generic {indexing_maps = [#id4, #mask, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s, %m : tensor<2x3x8x16xf32>, tensor<8x16xf32>) outs(%e4 : tensor<2x3x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.addf %a, %b : f32
    %w = arith.extf %v : f32 to f64
    %c = arith.cmpf oeq, %w, %ninf64 : f64
    %r = arith.uitofp %c : i1 to f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x16xf32>
  %top = linalg.fill ins(%inf : f32) outs(%e3 : tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %least = linalg.generic {indexing_maps = [#id4, #row4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%flags : tensor<2x3x8x16xf32>) outs(%top : tensor<2x3x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.minimumf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8xf32>
  %leastk = tensor.expand_shape %least [[0], [1], [2, 3]] output_shape [2, 3, 8, 1] : tensor<2x3x8xf32> into tensor<2x3x8x1xf32>
  %eb = tensor.empty() : tensor<2x3x8x1xi1>
  %masked = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%leastk : tensor<2x3x8x1xf32>) outs(%eb : tensor<2x3x8x1xi1>) {
  ^bb0(%a: f32, %o: i1):
    %r = arith.cmpf une, %a, %zero : f32
    linalg.yield %r : i1
  } -> tensor<2x3x8x1xi1>
  %nothing = arith.constant dense<0.0> : tensor<2x3x8x16xf32>
  %safe = linalg.generic {indexing_maps = [#keep4, #id4, #id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%masked, %nothing, %p : tensor<2x3x8x1xi1>, tensor<2x3x8x16xf32>, tensor<2x3x8x16xf32>) outs(%e4 : tensor<2x3x8x16xf32>) {
  ^bb0(%c: i1, %a: f32, %b: f32, %o: f32):
    %r = arith.select %c, %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x16xf32>
  return %safe : tensor<2x3x8x16xf32>
}

// -----

// Attention in a bf16 model (V widened from bf16): with --attention (bf16 attention, kiln's
// default) P @ V goes to kiln's kernel, which rounds P to bf16, so the softmax, P @ V its only
// reader, writes bf16 itself. The call returns bf16, a plain widening keeps the module's f32 uses,
// and the attention function takes P and V in bf16 as they are: no rounding pass. Without
// --attention P @ V stays f32 with IREE, and so does the softmax.
// ATTENTION:       stream.executable.export public @softmax_bf16
// ATTENTION-LABEL: func.func private @kiln_cpu_attention_0(
// ATTENTION-SAME:      %{{.*}}: tensor<2x8x32xbf16>{{.*}}, %{{.*}}: tensor<2x32x64xbf16>
// ATTENTION-NOT:     arith.truncf
// ATTENTION:         flow.dispatch @kiln_cpu_kernels::@conv_bf16
// ATTENTION-LABEL: func.func private @kiln_cpu_softmax_0(
// ATTENTION-SAME:      -> tensor<2x8x32xbf16>
// ATTENTION:         flow.dispatch @kiln_cpu_kernels::@softmax_bf16{{.*}} -> tensor<16x32xbf16>
// ATTENTION-LABEL: func.func @bf16_attention(
// ATTENTION:         %[[P16:.*]] = call @kiln_cpu_softmax_0(%arg0) : (tensor<2x8x32xf32>) -> tensor<2x8x32xbf16>
// ATTENTION:         %[[Y:.*]] = call @kiln_cpu_attention_0(%[[P16]], %arg1) : (tensor<2x8x32xbf16>, tensor<2x32x64xbf16>) -> tensor<2x8x64xf32>
// ATTENTION:         return %[[Y]]
// CHECK-LABEL: func.func @bf16_attention(
// CHECK:         call @kiln_cpu_softmax_0(%arg0) : (tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
// CHECK:         linalg.batch_matmul
// REPORT:      | softmax 2x8x32 | kiln | {{.*}} row softmax of kiln_rows.c |
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row3 = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @bf16_attention(%x: tensor<2x8x32xf32>, %v16: tensor<2x32x64xbf16>) -> tensor<2x8x64xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e3 = tensor.empty() : tensor<2x8x32xf32>
  %e2 = tensor.empty() : tensor<2x8xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%e2 : tensor<2x8xf32>) -> tensor<2x8xf32>
  %max = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x : tensor<2x8x32xf32>) outs(%init : tensor<2x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %d = linalg.generic {indexing_maps = [#id3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %max : tensor<2x8x32xf32>, tensor<2x8xf32>) outs(%e3 : tensor<2x8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.subf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x8x32xf32>
  %ex = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%d : tensor<2x8x32xf32>) outs(%e3 : tensor<2x8x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<2x8x32xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x8xf32>) -> tensor<2x8xf32>
  %sum = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%ex : tensor<2x8x32xf32>) outs(%zeros : tensor<2x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %p = linalg.generic {indexing_maps = [#id3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x8x32xf32>, tensor<2x8xf32>) outs(%e3 : tensor<2x8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x8x32xf32>
  %ev = tensor.empty() : tensor<2x32x64xf32>
  %v = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%v16 : tensor<2x32x64xbf16>) outs(%ev : tensor<2x32x64xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %r = arith.extf %a : bf16 to f32
    linalg.yield %r : f32
  } -> tensor<2x32x64xf32>
  %eo = tensor.empty() : tensor<2x8x64xf32>
  %zo = linalg.fill ins(%zero : f32) outs(%eo : tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x8x32xf32>, tensor<2x32x64xf32>) outs(%zo : tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  return %o : tensor<2x8x64xf32>
}

// -----

// Must not fire: the sum starts at 1, so this is not exp / sum(exp).
// CHECK-LABEL: func.func @sum_from_one(
// CHECK-NOT:     kiln_cpu_softmax
// CHECK:         arith.divf
// REPORT-NOT:  softmax
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row2 = affine_map<(d0, d1) -> (d0)>
func.func @sum_from_one(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %one = arith.constant 1.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e2 = tensor.empty() : tensor<4x32xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %max = linalg.generic {indexing_maps = [#id2, #row2], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x32xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %d = linalg.generic {indexing_maps = [#id2, #row2, #id2], iterator_types = ["parallel", "parallel"]} ins(%x, %max : tensor<4x32xf32>, tensor<4xf32>) outs(%e2 : tensor<4x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.subf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x32xf32>
  %ex = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%d : tensor<4x32xf32>) outs(%e2 : tensor<4x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4x32xf32>
  %ones = linalg.fill ins(%one : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#id2, #row2], iterator_types = ["parallel", "reduction"]} ins(%ex : tensor<4x32xf32>) outs(%ones : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %p = linalg.generic {indexing_maps = [#id2, #row2, #id2], iterator_types = ["parallel", "parallel"]} ins(%ex, %sum : tensor<4x32xf32>, tensor<4xf32>) outs(%e2 : tensor<4x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x32xf32>
  return %p : tensor<4x32xf32>
}

// -----

// Must not fire: the reduction runs over the first dimension (a softmax over columns).
// CHECK-LABEL: func.func @over_columns(
// CHECK-NOT:     kiln_cpu_softmax
// CHECK:         arith.divf
// REPORT-NOT:  softmax
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row2 = affine_map<(d0, d1) -> (d0)>
#col2 = affine_map<(d0, d1) -> (d1)>
#t2 = affine_map<(d0, d1) -> (d1, d0)>
func.func @over_columns(%x: tensor<32x32xf32>) -> tensor<32x32xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e2 = tensor.empty() : tensor<32x32xf32>
  %e1 = tensor.empty() : tensor<32xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<32xf32>) -> tensor<32xf32>
  %max = linalg.generic {indexing_maps = [#t2, #row2], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<32x32xf32>) outs(%init : tensor<32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<32xf32>
  %d = linalg.generic {indexing_maps = [#id2, #col2, #id2], iterator_types = ["parallel", "parallel"]} ins(%x, %max : tensor<32x32xf32>, tensor<32xf32>) outs(%e2 : tensor<32x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.subf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>
  %ex = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%d : tensor<32x32xf32>) outs(%e2 : tensor<32x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%e1 : tensor<32xf32>) -> tensor<32xf32>
  %sum = linalg.generic {indexing_maps = [#t2, #row2], iterator_types = ["parallel", "reduction"]} ins(%ex : tensor<32x32xf32>) outs(%zeros : tensor<32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<32xf32>
  %p = linalg.generic {indexing_maps = [#id2, #col2, #id2], iterator_types = ["parallel", "parallel"]} ins(%ex, %sum : tensor<32x32xf32>, tensor<32xf32>) outs(%e2 : tensor<32x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<32x32xf32>
  return %p : tensor<32x32xf32>
}
