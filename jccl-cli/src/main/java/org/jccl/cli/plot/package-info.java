/**
 * {@code jccl plot} and {@code jccl perf --plot}: bus bandwidth against message size, one line per
 * run. {@link org.jccl.cli.plot.PerfRunReader} reads the runs ({@code -J} reports of jccl perf and
 * nccl-tests, the CPU anchors' output), {@link org.jccl.cli.plot.BusBwChart} draws them with JFreeChart
 * (LGPL-2.1) and writes PNG, or SVG through Apache Batik (Apache-2.0); both are optional dependencies
 * of jccl-cli.
 */
package org.jccl.cli.plot;
