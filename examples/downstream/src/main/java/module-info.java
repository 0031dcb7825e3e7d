/**
 * A user's program on jccl: {@code requires org.jccl.core} names jccl-core by the
 * {@code Automatic-Module-Name} in its jar's manifest.
 */
module com.example.average {
    requires org.jccl.core;
}
