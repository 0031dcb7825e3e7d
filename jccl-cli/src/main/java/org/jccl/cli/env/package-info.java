/**
 * {@code jccl env}: every setting of the registry with its effective value and where it came from
 * (default, env, file:&lt;path&gt;, code), the config file read, the job identity found, and the
 * warnings about variables that have no effect ({@link org.jccl.cli.env.EnvReport} builds it,
 * {@link org.jccl.cli.env.EnvCommand} is its command line).
 */
package org.jccl.cli.env;
