#!/bin/sh
# Redraws the chart images the README shows, on the built-in simulated cluster (`inferbot demo`):
# the demo's history (a day of Qwen traffic with one restart, earlier Kimi loads) is written through the
# store's own methods, so these are the pictures the bot draws from its samples.
set -eu
cd "$(dirname "$0")/.."
INFERBOT=${INFERBOT:-inferbot}
"$INFERBOT" demo "chart throughput qwen" --png docs/chart-throughput.png
