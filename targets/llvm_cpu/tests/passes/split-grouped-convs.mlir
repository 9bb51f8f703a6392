// RUN: kiln opt %s --pass split-grouped-convs --split-input-file | filecheck %s

// Two groups of 32 input channels: each group's channel slices (the group axis dropped) go to a
// plain NCHW convolution, whose result is inserted at its group of the whole.
// CHECK-LABEL: func.func @two_groups
// CHECK:         %[[X0:.*]] = tensor.extract_slice %arg0[0, 0, 0, 0, 0] [1, 1, 32, 6, 6] [1, 1, 1, 1, 1] : tensor<1x2x32x6x6xbf16> to tensor<1x32x6x6xbf16>
// CHECK:         %[[W0:.*]] = tensor.extract_slice %arg1[0, 0, 0, 0, 0] [1, 16, 32, 3, 3] [1, 1, 1, 1, 1] : tensor<2x16x32x3x3xbf16> to tensor<16x32x3x3xbf16>
// CHECK:         %[[Y0:.*]] = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%[[X0]], %[[W0]] : tensor<1x32x6x6xbf16>, tensor<16x32x3x3xbf16>)
// CHECK:         %[[R0:.*]] = tensor.insert_slice %[[Y0]] into %arg2[0, 0, 0, 0, 0] [1, 1, 16, 2, 2] [1, 1, 1, 1, 1]
// CHECK:         tensor.extract_slice %arg0[0, 1, 0, 0, 0]
// CHECK:         %[[Y1:.*]] = linalg.conv_2d_nchw_fchw
// CHECK:         %[[R1:.*]] = tensor.insert_slice %[[Y1]] into %[[R0]][0, 1, 0, 0, 0]
// CHECK:         return %[[R1]]
// CHECK-NOT:     conv_2d_ngchw_gfchw
module {
  func.func @two_groups(%x: tensor<1x2x32x6x6xbf16>, %w: tensor<2x16x32x3x3xbf16>, %init: tensor<1x2x16x2x2xf32>) -> tensor<1x2x16x2x2xf32> {
    %y = linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x, %w : tensor<1x2x32x6x6xbf16>, tensor<2x16x32x3x3xbf16>) outs(%init : tensor<1x2x16x2x2xf32>) -> tensor<1x2x16x2x2xf32>
    return %y : tensor<1x2x16x2x2xf32>
  }
}

// -----

// Groups of 4 input channels (ResNeXt's) stay with IREE.
// CHECK-LABEL: func.func @narrow_groups
// CHECK:         linalg.conv_2d_ngchw_gfchw
// CHECK-NOT:     conv_2d_nchw_fchw
module {
  func.func @narrow_groups(%x: tensor<1x8x4x6x6xf32>, %w: tensor<8x4x4x3x3xf32>, %init: tensor<1x8x4x4x4xf32>) -> tensor<1x8x4x4x4xf32> {
    %y = linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x8x4x6x6xf32>, tensor<8x4x4x3x3xf32>) outs(%init : tensor<1x8x4x4x4xf32>) -> tensor<1x8x4x4x4xf32>
    return %y : tensor<1x8x4x4x4xf32>
  }
}

// -----

// An NCHW input viewed as groups, as torch-to-linalg gives it: transposed to NHWC once and padded
// there, each group's channels sliced from the NHWC tensor (then made the NCHW operand the kernel's
// route transposes back, which IREE cancels), each result transposed to NHWC and put at its
// channels of one NHWC tensor, which is transposed to NCHW once and viewed as groups again.
// CHECK-LABEL: func.func @nchw_input
// CHECK:         %[[T:.*]] = linalg.transpose ins(%arg0 : tensor<1x64x6x6xbf16>) outs(%{{.*}} : tensor<1x6x6x64xbf16>) permutation = [0, 2, 3, 1]
// CHECK:         %[[P:.*]] = tensor.pad %[[T]] low[0, 1, 1, 0] high[0, 1, 1, 0]
// CHECK:         %[[G:.*]] = tensor.empty() : tensor<1x3x3x32xf32>
// CHECK:         %[[X0:.*]] = tensor.extract_slice %[[P]][0, 0, 0, 0] [1, 8, 8, 32] [1, 1, 1, 1] : tensor<1x8x8x64xbf16> to tensor<1x8x8x32xbf16>
// CHECK:         %[[X0T:.*]] = linalg.transpose ins(%[[X0]] : tensor<1x8x8x32xbf16>) outs(%{{.*}} : tensor<1x32x8x8xbf16>) permutation = [0, 3, 1, 2]
// CHECK:         %[[Y0:.*]] = linalg.conv_2d_nchw_fchw {{.*}} ins(%[[X0T]], %{{.*}} : tensor<1x32x8x8xbf16>, tensor<16x32x3x3xbf16>)
// CHECK:         %[[Y0T:.*]] = linalg.transpose ins(%[[Y0]] : tensor<1x16x3x3xf32>) outs(%{{.*}} : tensor<1x3x3x16xf32>) permutation = [0, 2, 3, 1]
// CHECK:         %[[R0:.*]] = tensor.insert_slice %[[Y0T]] into %[[G]][0, 0, 0, 0] [1, 3, 3, 16] [1, 1, 1, 1]
// CHECK:         tensor.extract_slice %[[P]][0, 0, 0, 32] [1, 8, 8, 32]
// CHECK:         %[[R1:.*]] = tensor.insert_slice %{{.*}} into %[[R0]][0, 0, 0, 16] [1, 3, 3, 16]
// CHECK:         %[[N:.*]] = linalg.transpose ins(%[[R1]] : tensor<1x3x3x32xf32>) outs(%{{.*}} : tensor<1x32x3x3xf32>) permutation = [0, 3, 1, 2]
// CHECK:         %[[E:.*]] = tensor.expand_shape %[[N]] {{\[\[}}0], [1, 2], [3], [4]] output_shape [1, 2, 16, 3, 3]
// CHECK:         return %[[E]]
// CHECK-NOT:     conv_2d_ngchw_gfchw
// CHECK-NOT:     tensor<1x64x8x8xbf16>
module {
  func.func @nchw_input(%x: tensor<1x64x6x6xbf16>, %w: tensor<2x16x32x3x3xbf16>) -> tensor<1x2x16x3x3xf32> {
    %zero = arith.constant 0.0 : bf16
    %fzero = arith.constant 0.0 : f32
    %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
    ^bb0(%i: index, %j: index, %k: index, %l: index):
      tensor.yield %zero : bf16
    } : tensor<1x64x6x6xbf16> to tensor<1x64x8x8xbf16>
    %x5 = tensor.expand_shape %p [[0], [1, 2], [3], [4]] output_shape [1, 2, 32, 8, 8] : tensor<1x64x8x8xbf16> into tensor<1x2x32x8x8xbf16>
    %e = tensor.empty() : tensor<1x2x16x3x3xf32>
    %init = linalg.fill ins(%fzero : f32) outs(%e : tensor<1x2x16x3x3xf32>) -> tensor<1x2x16x3x3xf32>
    %y = linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%x5, %w : tensor<1x2x32x8x8xbf16>, tensor<2x16x32x3x3xbf16>) outs(%init : tensor<1x2x16x3x3xf32>) -> tensor<1x2x16x3x3xf32>
    return %y : tensor<1x2x16x3x3xf32>
  }
}
