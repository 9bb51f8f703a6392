// RUN: python -m kiln.targets.llvm_cpu.kernels %s | filecheck %s
// RUN: python -m kiln.targets.llvm_cpu.kernels %s --report | filecheck %s --check-prefix=REPORT
// RUN: python -m kiln.targets.llvm_cpu.kernels %s --attention | filecheck %s --check-prefix=ATTENTION

// A bf16 3x3 convolution over a zero-padded input, with a zero-filled f32 init: a call to a
// function that pads in NHWC (after the transpose), packs the weight and dispatches the kernel.
// CHECK-LABEL: stream.executable private @kiln_cpu_kernels
// CHECK:         hal.executable.object<{path = "kiln_gemm_bf16.o"}>
// CHECK-LABEL: func.func private @kiln_cpu_conv_0(
// CHECK-SAME:      tensor<2x32x8x8xbf16>{{.*}}tensor<64x32x3x3xbf16>{{.*}}-> tensor<2x64x8x8xf32>
// CHECK:         linalg.transpose ins(%{{.*}} : tensor<2x32x8x8xbf16>) outs(%{{.*}} : tensor<2x8x8x32xbf16>) permutation = [0, 2, 3, 1]
// CHECK:         tensor.pad %{{.*}} low[0, 1, 1, 0] high[0, 1, 1, 0]
// CHECK:         flow.dispatch @kiln_cpu_kernels::@conv_bf16{{.*}}(tensor<2x10x10x32xbf16>, tensor<4x9x16x16x2xbf16>,
// CHECK-SAME:      -> tensor<2x8x8x64xf32>
// CHECK:         linalg.transpose ins(%{{.*}} : tensor<2x8x8x64xf32>) outs(%{{.*}} : tensor<2x64x8x8xf32>) permutation = [0, 3, 1, 2]
// CHECK-LABEL: func.func @conv(
// CHECK-NOT:     linalg.conv_2d_nchw_fchw
// CHECK:         call @kiln_cpu_conv_0(%arg0, %{{[a-z_0-9]*}})
// REPORT:      | linalg.conv_2d_nchw_fchw 2x32x10x10 * 64x32x3x3 stride 1 | kiln | 1 output rows x 32 channels, K whole | [2, 16] |
func.func @conv(%x: tensor<2x32x8x8xbf16>) -> tensor<2x64x8x8xf32> {
  %zero16 = arith.constant 0.0 : bf16
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense<1.0> : tensor<64x32x3x3xbf16>
  %padded = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero16 : bf16
  } : tensor<2x32x8x8xbf16> to tensor<2x32x10x10xbf16>
  %e = tensor.empty() : tensor<2x64x8x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<2x64x8x8xf32>) -> tensor<2x64x8x8xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
    ins(%padded, %w : tensor<2x32x10x10xbf16>, tensor<64x32x3x3xbf16>) outs(%init : tensor<2x64x8x8xf32>) -> tensor<2x64x8x8xf32>
  return %y : tensor<2x64x8x8xf32>
}

// -----

// A convolution with a bias (its init) and 3 input channels (a stem): a row window of 3 x 3 values,
// rounded up to 32, one more zero row at the bottom, and the bias added to the result while it is
// NHWC, then one plain transpose to NCHW (which IREE moves into the consumers, NHWC themselves).
// CHECK-LABEL: func.func private @kiln_cpu_conv_0(
// CHECK-SAME:      %{{.*}}: tensor<1x3x16x16xbf16>{{.*}}, %{{.*}}: tensor<32x3x3x3xbf16>{{.*}}, %{{.*}}: tensor<1x32x8x8xf32>
// CHECK:         tensor.pad %{{.*}} low[0, 1, 1, 0] high[0, 2, 1, 0]
// CHECK:         } : tensor<1x16x16x3xbf16> to tensor<1x19x18x3xbf16>
// CHECK:         tensor.pad %{{.*}} low[0, 0, 0] high[0, 0, 23]
// CHECK:         } : tensor<32x3x9xbf16> to tensor<32x3x32xbf16>
// CHECK:         flow.dispatch @kiln_cpu_kernels::@conv_bf16{{.*}}(tensor<1x19x18x3xbf16>, tensor<2x3x16x16x2xbf16>,
// CHECK:         linalg.generic
// CHECK:           arith.addf
// CHECK:         } -> tensor<1x8x8x32xf32>
// CHECK:         linalg.transpose ins(%{{.*}} : tensor<1x8x8x32xf32>) outs(%{{.*}} : tensor<1x32x8x8xf32>) permutation = [0, 3, 1, 2]
// CHECK-LABEL: func.func @stem(
// CHECK:         call @kiln_cpu_conv_0(%arg0, %{{[a-z_0-9]*}}, %{{[a-z_0-9]*}})
// REPORT:      | linalg.conv_2d_nchw_fchw 1x3x18x18 * 32x3x3x3 stride 2 | kiln |
func.func @stem(%x: tensor<1x3x16x16xbf16>) -> tensor<1x32x8x8xf32> {
  %zero16 = arith.constant 0.0 : bf16
  %w = arith.constant dense<1.0> : tensor<32x3x3x3xbf16>
  %bias = arith.constant dense<0.5> : tensor<32xf32>
  %padded = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero16 : bf16
  } : tensor<1x3x16x16xbf16> to tensor<1x3x18x18xbf16>
  %e = tensor.empty() : tensor<1x32x8x8xf32>
  %init = linalg.broadcast ins(%bias : tensor<32xf32>) outs(%e : tensor<1x32x8x8xf32>) dimensions = [0, 2, 3]
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
    ins(%padded, %w : tensor<1x3x18x18xbf16>, tensor<32x3x3x3xbf16>) outs(%init : tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
  return %y : tensor<1x32x8x8xf32>
}

// -----

// kiln's bf16 Linear: extf(x) @ extf(transpose(W)). The kernel reads x as bf16 and packs W itself.
// The second layer's activations are f32 values that are all bf16 values (extf of a truncf): they are
// truncated to bf16 exactly. The third has K = 48 and 2048 x 2048 results: both operands get zeros
// up to K = 64 (the activations' rows and the weight's columns). The fourth has K = 4: padded to 32
// it would be 8x zeros. The fifth has K = 48 and 16 x 8 results: too small for the zeros to pay.
// CHECK-LABEL: func.func private @kiln_cpu_matmul_2(
// CHECK-SAME:      tensor<2048x48xbf16>{{.*}}tensor<48x2048xbf16>
// CHECK:         tensor.pad %{{.*}} low[0, 0] high[0, 16]
// CHECK:         } : tensor<2048x48xbf16> to tensor<2048x64xbf16>
// CHECK:         tensor.pad %{{.*}} low[0, 0] high[0, 16]
// CHECK:         } : tensor<2048x48xbf16> to tensor<2048x64xbf16>
// CHECK:         flow.dispatch @kiln_cpu_kernels::@conv_bf16{{.*}}(tensor<1x8x256x64xbf16>, tensor<128x2x16x16x2xbf16>,
// CHECK-LABEL: func.func private @kiln_cpu_matmul_1(
// CHECK-SAME:      tensor<16x64xf32>{{.*}}tensor<32x64xbf16>
// CHECK:         arith.truncf
// CHECK:         flow.dispatch @kiln_cpu_kernels::@conv_bf16
// CHECK-LABEL: func.func private @kiln_cpu_matmul_0(
// CHECK-SAME:      tensor<16x32xbf16>{{.*}}tensor<64x32xbf16>
// CHECK-NOT:     arith.truncf
// CHECK:         flow.dispatch @kiln_cpu_kernels::@conv_bf16{{.*}} -> tensor<1x1x16x64xf32>
// CHECK-LABEL: func.func @linear(
// CHECK:         call @kiln_cpu_matmul_0(%arg0, %{{[a-z_0-9]*}})
// CHECK:         call @kiln_cpu_matmul_1(%{{[a-z_0-9]*}}, %{{[a-z_0-9]*}})
// CHECK:         call @kiln_cpu_matmul_2(%arg1, %{{[a-z_0-9]*}})
// CHECK-COUNT-2: linalg.matmul
// REPORT:      | linalg.matmul 16x32 * 32x64 | kiln |
// REPORT:      | linalg.matmul 16x64 * 64x32 | kiln |
// REPORT:      | linalg.matmul 2048x48 * 48x2048 | kiln |
// REPORT:      | linalg.matmul 2048x4 * 4x2048 | iree | | | | K = 4: rounded up to 32, it would be over 4x zeros |
// REPORT:      | linalg.matmul 16x48 * 48x8 | iree | | | | K = 48, not a multiple of 32, in a contraction too small for zeros up to 64 to pay |
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @linear(%x: tensor<16x32xbf16>, %x3: tensor<2048x48xbf16>, %x4: tensor<2048x4xbf16>, %x5: tensor<16x48xbf16>) -> (tensor<16x32xf32>, tensor<2048x2048xf32>, tensor<2048x2048xf32>, tensor<16x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %w1 = arith.constant dense<1.0> : tensor<64x32xbf16>
  %w2 = arith.constant dense<1.0> : tensor<32x64xbf16>
  %x32e = tensor.empty() : tensor<16x32xf32>
  %x32 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<16x32xbf16>) outs(%x32e : tensor<16x32xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<16x32xf32>
  %t1e = tensor.empty() : tensor<32x64xbf16>
  %t1 = linalg.transpose ins(%w1 : tensor<64x32xbf16>) outs(%t1e : tensor<32x64xbf16>) permutation = [1, 0]
  %b1e = tensor.empty() : tensor<32x64xf32>
  %b1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t1 : tensor<32x64xbf16>) outs(%b1e : tensor<32x64xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<32x64xf32>
  %y1e = tensor.empty() : tensor<16x64xf32>
  %y1i = linalg.fill ins(%zero : f32) outs(%y1e : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y1 = linalg.matmul ins(%x32, %b1 : tensor<16x32xf32>, tensor<32x64xf32>) outs(%y1i : tensor<16x64xf32>) -> tensor<16x64xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y1 : tensor<16x64xf32>) outs(%y1e : tensor<16x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %in, %zero : f32
    %t = arith.truncf %r : f32 to bf16
    %v = arith.extf %t : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<16x64xf32>
  %t2e = tensor.empty() : tensor<64x32xbf16>
  %t2 = linalg.transpose ins(%w2 : tensor<32x64xbf16>) outs(%t2e : tensor<64x32xbf16>) permutation = [1, 0]
  %b2e = tensor.empty() : tensor<64x32xf32>
  %b2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%t2 : tensor<64x32xbf16>) outs(%b2e : tensor<64x32xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<64x32xf32>
  %y2e = tensor.empty() : tensor<16x32xf32>
  %y2i = linalg.fill ins(%zero : f32) outs(%y2e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y2 = linalg.matmul ins(%g, %b2 : tensor<16x64xf32>, tensor<64x32xf32>) outs(%y2i : tensor<16x32xf32>) -> tensor<16x32xf32>
  %w3 = arith.constant dense<1.0> : tensor<48x2048xbf16>
  %a3e = tensor.empty() : tensor<2048x48xf32>
  %a3 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x3 : tensor<2048x48xbf16>) outs(%a3e : tensor<2048x48xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<2048x48xf32>
  %b3e = tensor.empty() : tensor<48x2048xf32>
  %b3 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w3 : tensor<48x2048xbf16>) outs(%b3e : tensor<48x2048xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<48x2048xf32>
  %y3e = tensor.empty() : tensor<2048x2048xf32>
  %y3i = linalg.fill ins(%zero : f32) outs(%y3e : tensor<2048x2048xf32>) -> tensor<2048x2048xf32>
  %y3 = linalg.matmul ins(%a3, %b3 : tensor<2048x48xf32>, tensor<48x2048xf32>) outs(%y3i : tensor<2048x2048xf32>) -> tensor<2048x2048xf32>
  %w4 = arith.constant dense<1.0> : tensor<4x2048xbf16>
  %a4e = tensor.empty() : tensor<2048x4xf32>
  %a4 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x4 : tensor<2048x4xbf16>) outs(%a4e : tensor<2048x4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<2048x4xf32>
  %b4e = tensor.empty() : tensor<4x2048xf32>
  %b4 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w4 : tensor<4x2048xbf16>) outs(%b4e : tensor<4x2048xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<4x2048xf32>
  %y4e = tensor.empty() : tensor<2048x2048xf32>
  %y4i = linalg.fill ins(%zero : f32) outs(%y4e : tensor<2048x2048xf32>) -> tensor<2048x2048xf32>
  %y4 = linalg.matmul ins(%a4, %b4 : tensor<2048x4xf32>, tensor<4x2048xf32>) outs(%y4i : tensor<2048x2048xf32>) -> tensor<2048x2048xf32>
  %w5 = arith.constant dense<1.0> : tensor<48x8xbf16>
  %a5e = tensor.empty() : tensor<16x48xf32>
  %a5 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x5 : tensor<16x48xbf16>) outs(%a5e : tensor<16x48xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<16x48xf32>
  %b5e = tensor.empty() : tensor<48x8xf32>
  %b5 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w5 : tensor<48x8xbf16>) outs(%b5e : tensor<48x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<48x8xf32>
  %y5e = tensor.empty() : tensor<16x8xf32>
  %y5i = linalg.fill ins(%zero : f32) outs(%y5e : tensor<16x8xf32>) -> tensor<16x8xf32>
  %y5 = linalg.matmul ins(%a5, %b5 : tensor<16x48xf32>, tensor<48x8xf32>) outs(%y5i : tensor<16x8xf32>) -> tensor<16x8xf32>
  return %y2, %y3, %y4, %y5 : tensor<16x32xf32>, tensor<2048x2048xf32>, tensor<2048x2048xf32>, tensor<16x8xf32>
}
// -----

// A batch matmul whose right side is one bf16 weight broadcast over the batch (a projection): one
// GEMM over batch x M rows. Attention's batch matmul of two activations stays with IREE, unless
// --attention rounds both operands to bf16 (K, a plain widening of bf16, is taken as it was; Q,
// squared in f32, is rounded) and packs the right one on every call.
// CHECK-LABEL: func.func private @kiln_cpu_matmul_0(
// CHECK-SAME:      tensor<4x8x32xbf16>{{.*}}tensor<32x64xbf16>{{.*}}-> tensor<4x8x64xf32>
// CHECK:         tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : tensor<4x8x32xbf16> into tensor<32x32xbf16>
// CHECK:         flow.dispatch @kiln_cpu_kernels::@conv_bf16
// CHECK-LABEL: func.func @projection_and_attention(
// CHECK:         call @kiln_cpu_matmul_0(%arg0, %{{[a-z_0-9]*}})
// CHECK:         linalg.batch_matmul
// REPORT:      | linalg.batch_matmul 4x8x32 * 4x32x64 | kiln |
// REPORT:      | linalg.batch_matmul 4x8x64 * 4x64x8 | iree | | | | both operands are activations (attention)
// ATTENTION-LABEL: func.func private @kiln_cpu_attention_1(
// ATTENTION-SAME:      tensor<4x8x64xf32>{{.*}}tensor<4x64x8xbf16>
// ATTENTION-COUNT-1: arith.truncf
// ATTENTION-NOT:     arith.truncf
// ATTENTION:         flow.dispatch @kiln_cpu_kernels::@conv_bf16{{.*}}(tensor<4x1x8x64xbf16>, tensor<4x1x2x16x16x2xbf16>,
// ATTENTION-LABEL: func.func @projection_and_attention(
// ATTENTION:         call @kiln_cpu_attention_1(%{{.*}}, %arg2) : (tensor<4x8x64xf32>, tensor<4x64x8xbf16>)
// ATTENTION-NOT:     linalg.batch_matmul
#bcast = affine_map<(d0, d1, d2) -> (d1, d2)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @projection_and_attention(%x: tensor<4x8x32xbf16>, %q16: tensor<4x8x64xbf16>, %k16: tensor<4x64x8xbf16>) -> (tensor<4x8x64xf32>, tensor<4x8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %qe = tensor.empty() : tensor<4x8x64xf32>
  %q = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%q16 : tensor<4x8x64xbf16>) outs(%qe : tensor<4x8x64xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    %s = arith.mulf %v, %v : f32
    linalg.yield %s : f32
  } -> tensor<4x8x64xf32>
  %ke = tensor.empty() : tensor<4x64x8xf32>
  %k = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%k16 : tensor<4x64x8xbf16>) outs(%ke : tensor<4x64x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<4x64x8xf32>
  %w = arith.constant dense<1.0> : tensor<32x64xbf16>
  %we = tensor.empty() : tensor<4x32x64xbf16>
  %wb = linalg.generic {indexing_maps = [#bcast, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%w : tensor<32x64xbf16>) outs(%we : tensor<4x32x64xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    linalg.yield %in : bf16
  } -> tensor<4x32x64xbf16>
  %pe = tensor.empty() : tensor<4x8x64xf32>
  %pi = linalg.fill ins(%zero : f32) outs(%pe : tensor<4x8x64xf32>) -> tensor<4x8x64xf32>
  %p = linalg.batch_matmul ins(%x, %wb : tensor<4x8x32xbf16>, tensor<4x32x64xbf16>) outs(%pi : tensor<4x8x64xf32>) -> tensor<4x8x64xf32>
  %se = tensor.empty() : tensor<4x8x8xf32>
  %si = linalg.fill ins(%zero : f32) outs(%se : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %s = linalg.batch_matmul ins(%q, %k : tensor<4x8x64xf32>, tensor<4x64x8xf32>) outs(%si : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  return %p, %s : tensor<4x8x64xf32>, tensor<4x8x8xf32>
}

// -----

// Must not fire: a depthwise convolution, a 1x1 convolution over 3 channels (a row window of 32 for 3
// values), a dilated one. Each is listed with the reason.
// CHECK-LABEL: func.func @others(
// CHECK-NOT:     call @kiln_cpu
// CHECK:         linalg.depthwise_conv_2d_nchw_chw
// CHECK:         linalg.conv_2d_nchw_fchw
// CHECK:         linalg.conv_2d_nchw_fchw
// CHECK-NOT:     stream.executable
// REPORT:      | linalg.depthwise_conv_2d_nchw_chw 1x32x8x8 * 32x3x3 | iree | | | | a depthwise convolution is not a GEMM |
// REPORT-NEXT: | linalg.conv_2d_nchw_fchw 1x3x8x8 * 16x3x1x1 stride 1 | iree | | | | 3 input channels x 1 columns: a row window would be over 4x zeros |
// REPORT-NEXT: | linalg.conv_2d_nchw_fchw 1x32x8x8 * 16x32x3x3 stride 1 | iree | | | | dilated |
func.func @others(%x: tensor<1x32x8x8xbf16>, %x3: tensor<1x3x8x8xbf16>) -> (tensor<1x32x6x6xf32>, tensor<1x16x8x8xf32>, tensor<1x16x4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %dw = arith.constant dense<1.0> : tensor<32x3x3xbf16>
  %de = tensor.empty() : tensor<1x32x6x6xf32>
  %di = linalg.fill ins(%zero : f32) outs(%de : tensor<1x32x6x6xf32>) -> tensor<1x32x6x6xf32>
  %d = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
    ins(%x, %dw : tensor<1x32x8x8xbf16>, tensor<32x3x3xbf16>) outs(%di : tensor<1x32x6x6xf32>) -> tensor<1x32x6x6xf32>
  %pw = arith.constant dense<1.0> : tensor<16x3x1x1xbf16>
  %pe = tensor.empty() : tensor<1x16x8x8xf32>
  %pi = linalg.fill ins(%zero : f32) outs(%pe : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %p = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
    ins(%x3, %pw : tensor<1x3x8x8xbf16>, tensor<16x3x1x1xbf16>) outs(%pi : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %lw = arith.constant dense<1.0> : tensor<16x32x3x3xbf16>
  %le = tensor.empty() : tensor<1x16x4x4xf32>
  %li = linalg.fill ins(%zero : f32) outs(%le : tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  %l = linalg.conv_2d_nchw_fchw {dilations = dense<2> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
    ins(%x, %lw : tensor<1x32x8x8xbf16>, tensor<16x32x3x3xbf16>) outs(%li : tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  return %d, %p, %l : tensor<1x32x6x6xf32>, tensor<1x16x8x8xf32>, tensor<1x16x4x4xf32>
}

// -----

// An f32 model (no bf16 contraction): its contractions go to the kernel's f32 path, its own export
// over f32 input and weights packed as [n16][t][32][16] f32 (cout 8 padded to 16), attention's batch
// matmul of two activations too (packed on every call, in f32: --attention is about bf16 models).
// CHECK-LABEL: stream.executable private @kiln_cpu_kernels
// CHECK:         stream.executable.export public @conv_f32
// CHECK:         func.func private @kiln_conv_f32_workgroup(memref<f32>, index, memref<f32>, index, memref<f32>
// CHECK-NOT:     @conv_bf16
// CHECK-LABEL: func.func private @kiln_cpu_attention_1(
// CHECK-SAME:      tensor<2x8x32xf32>{{.*}}tensor<2x32x8xf32>{{.*}}-> tensor<2x8x8xf32>
// CHECK-NOT:     arith.truncf
// CHECK:         linalg.transpose ins(%{{.*}} : tensor<2x1x16x1x32xf32>) outs(%{{.*}} : tensor<2x1x1x32x16xf32>) permutation = [0, 1, 3, 4, 2]
// CHECK:         flow.dispatch @kiln_cpu_kernels::@conv_f32
// CHECK-LABEL: func.func private @kiln_cpu_matmul_0(
// CHECK-SAME:      tensor<8x32xf32>{{.*}}tensor<32x8xf32>{{.*}}-> tensor<8x8xf32>
// CHECK:         tensor.pad %{{.*}} low[0, 0] high[8, 0]
// CHECK:         tensor.expand_shape %{{.*}} output_shape [1, 16, 1, 32] : tensor<16x32xf32> into tensor<1x16x1x32xf32>
// CHECK:         linalg.transpose ins(%{{.*}} : tensor<1x16x1x32xf32>) outs(%{{.*}} : tensor<1x1x32x16xf32>) permutation = [0, 2, 3, 1]
// CHECK:         flow.dispatch @kiln_cpu_kernels::@conv_f32[{{.*}}]({{.*}}) : (tensor<1x1x8x32xf32>, tensor<1x1x32x16xf32>
// CHECK-LABEL: func.func @f32_model(
// CHECK:         call @kiln_cpu_matmul_0(
// CHECK:         call @kiln_cpu_attention_1(
// REPORT:      | linalg.matmul 8x32 * 32x8 | kiln | 1 output rows x 64 channels, K whole | [1, 1] | 0.0 | avx512f path of kiln_gemm_avx512f.c |
// REPORT-NEXT: | linalg.batch_matmul 2x8x32 * 2x32x8 | kiln | 1 output rows x 64 channels, K whole | [1, 2] | 0.0 | avx512f path of kiln_gemm_avx512f.c |
// ATTENTION-LABEL: func.func @f32_model(
// ATTENTION:         call @kiln_cpu_matmul_0(
// ATTENTION:         call @kiln_cpu_attention_1(
func.func @f32_model(%a: tensor<8x32xf32>, %b: tensor<32x8xf32>, %q: tensor<2x8x32xf32>, %k: tensor<2x32x8xf32>) -> (tensor<8x8xf32>, tensor<2x8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %i = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m = linalg.matmul ins(%a, %b : tensor<8x32xf32>, tensor<32x8xf32>) outs(%i : tensor<8x8xf32>) -> tensor<8x8xf32>
  %se = tensor.empty() : tensor<2x8x8xf32>
  %si = linalg.fill ins(%zero : f32) outs(%se : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %s = linalg.batch_matmul ins(%q, %k : tensor<2x8x32xf32>, tensor<2x32x8xf32>) outs(%si : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  return %m, %s : tensor<8x8xf32>, tensor<2x8x8xf32>
}

// -----

// A max pooling next to the kernel's convolution is computed in NHWC (IREE's code): its padding (the
// fill value, -inf) after the transpose, so that IREE cancels the transposes against the kernel's.
// CHECK-LABEL: func.func private @kiln_cpu_pooling_0(
// CHECK-SAME:      tensor<1x32x8x8xbf16>{{.*}}tensor<3x3xbf16>{{.*}}-> tensor<1x32x4x4xbf16>
// CHECK:         linalg.transpose ins(%{{.*}} : tensor<1x32x8x8xbf16>) outs(%{{.*}} : tensor<1x8x8x32xbf16>) permutation = [0, 2, 3, 1]
// CHECK:         %[[NEG:.*]] = arith.constant 0xFF80 : bf16
// CHECK:         tensor.pad %{{.*}} low[0, 1, 1, 0] high[0, 1, 1, 0]
// CHECK:           tensor.yield %[[NEG]] : bf16
// CHECK:         linalg.pooling_nhwc_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%{{.*}}, %{{.*}} : tensor<1x10x10x32xbf16>, tensor<3x3xbf16>)
// CHECK:         linalg.transpose ins(%{{.*}} : tensor<1x4x4x32xbf16>) outs(%{{.*}} : tensor<1x32x4x4xbf16>) permutation = [0, 3, 1, 2]
// CHECK-LABEL: func.func @conv_then_pool(
// CHECK:         call @kiln_cpu_conv_0(
// CHECK:         call @kiln_cpu_pooling_0(
// CHECK-NOT:     linalg.pooling_nchw_max
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @conv_then_pool(%x: tensor<1x32x8x8xbf16>) -> tensor<1x32x4x4xbf16> {
  %zero = arith.constant 0.0 : f32
  %neg = arith.constant 0xFF80 : bf16
  %w = arith.constant dense<1.0> : tensor<32x32x1x1xbf16>
  %ce = tensor.empty() : tensor<1x32x8x8xf32>
  %ci = linalg.fill ins(%zero : f32) outs(%ce : tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
    ins(%x, %w : tensor<1x32x8x8xbf16>, tensor<32x32x1x1xbf16>) outs(%ci : tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
  %te = tensor.empty() : tensor<1x32x8x8xbf16>
  %t = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c : tensor<1x32x8x8xf32>) outs(%te : tensor<1x32x8x8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %v = arith.truncf %in : f32 to bf16
    linalg.yield %v : bf16
  } -> tensor<1x32x8x8xbf16>
  %padded = tensor.pad %t low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %neg : bf16
  } : tensor<1x32x8x8xbf16> to tensor<1x32x10x10xbf16>
  %pe = tensor.empty() : tensor<1x32x4x4xbf16>
  %pi = linalg.fill ins(%neg : bf16) outs(%pe : tensor<1x32x4x4xbf16>) -> tensor<1x32x4x4xbf16>
  %window = tensor.empty() : tensor<3x3xbf16>
  %p = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
    ins(%padded, %window : tensor<1x32x10x10xbf16>, tensor<3x3xbf16>) outs(%pi : tensor<1x32x4x4xbf16>) -> tensor<1x32x4x4xbf16>
  return %p : tensor<1x32x4x4xbf16>
}

// -----

// Must not fire: an empty matmul (K = 0), whose result the kernel would never write.
// CHECK-LABEL: func.func @empty(
// CHECK-NOT:     call @kiln_cpu
// CHECK:         linalg.matmul
// REPORT:      | linalg.matmul 3x0 * 0x4 | iree | | | | an empty operand |
func.func @empty(%a: tensor<3x0xf32>, %b: tensor<0x4xf32>) -> tensor<3x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x4xf32>
  %i = linalg.fill ins(%zero : f32) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  %m = linalg.matmul ins(%a, %b : tensor<3x0xf32>, tensor<0x4xf32>) outs(%i : tensor<3x4xf32>) -> tensor<3x4xf32>
  return %m : tensor<3x4xf32>
}

// -----

// Must not fire: a model of neither bf16 nor f32 (f16 operands, f32 result) is no f32 model's
// contraction for the kernel's f32 path.
// CHECK-LABEL: func.func @f16_batch_matmul(
// CHECK-NOT:     call @kiln_cpu
// CHECK:         linalg.batch_matmul
// REPORT:      | linalg.batch_matmul 2x8x32 * 2x32x8 | iree | | | | f16 x f16, not f32 x f32 |
func.func @f16_batch_matmul(%q: tensor<2x8x32xf16>, %k: tensor<2x32x8xf16>) -> tensor<2x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8x8xf32>
  %i = linalg.fill ins(%zero : f32) outs(%e : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %s = linalg.batch_matmul ins(%q, %k : tensor<2x8x32xf16>, tensor<2x32x8xf16>) outs(%i : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  return %s : tensor<2x8x8xf32>
}
