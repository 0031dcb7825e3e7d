/**
 * {@code jccl topo} (the host's topology as a tree or JSON) and {@code jccl doctor} (preflight
 * checks with fixes); the logic lives in {@code org.jccl.internal.topo}, these classes only parse
 * options and print.
 */
package org.jccl.cli.topo;
