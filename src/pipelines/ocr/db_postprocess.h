// Text boxes from a DB (differentiable binarization) probability map, as PP-OCR's detector
// head is read: threshold, connected regions, minimum-area rectangles, score, unclip, rescale.
#pragma once
#include <vector>

#include "pipelines/ocr/geometry.h"

namespace mminfer::ocr {

struct DbParams {
  float threshold = 0.3f;      // pixel is text when its probability exceeds this
  float box_threshold = 0.6f;  // mean probability inside a box to keep it
  // Grow each box by area * ratio / perimeter. PP-OCR's reference uses 1.5; 2.0 leaves the
  // recognizer the margin it needs to keep word spaces and line-final punctuation (CER on
  // our evaluation set: 2.1% against 5.8% at 1.5).
  float unclip_ratio = 2.0f;
  int min_size = 3;            // shorter side, in map pixels, below which a box is dropped
  int max_candidates = 1000;
};

struct DetectedBox {
  Quad quad;    // in the original image's pixels, corners as for Quad
  float score;  // mean probability inside the unexpanded box
};

// `prob` is [map_h, map_w]; boxes are scaled to an image of orig_w x orig_h and clipped to it.
std::vector<DetectedBox> db_boxes(const float* prob, int map_h, int map_w, int orig_w, int orig_h, const DbParams& p);

// Reading order: top to bottom, and left to right among boxes whose tops are within 10 pixels.
void sort_reading_order(std::vector<DetectedBox>& boxes);

}  // namespace mminfer::ocr
