/**
 * JMH micro-benchmarks of jccl's hot paths: the reduction kernels and, as their yardstick, a plain
 * memory copy. Build with {@code ./mvnw -B -pl jccl-bench -am package -DskipTests}, run with
 * {@code java -jar jccl-bench/target/jccl-benchmarks.jar}; measured tables live in docs/PERFORMANCE.md.
 */
package org.jccl.bench;
