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
