package org.jccl.internal.net;

import java.io.File;
import java.io.IOException;
import java.nio.channels.SocketChannel;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.TrustManagerFactory;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.config.Settings;

/**
 * Optional TLS for every jccl socket (bootstrap, control channel and TCP data), from {@code JCCL_TLS=1} with
 * {@code JCCL_TLS_KEYSTORE} (this rank's private key and certificate chain, PKCS12 or JKS),
 * {@code JCCL_TLS_KEYSTORE_PASSWORD} and {@code JCCL_TLS_TRUSTSTORE} (the CA certificate(s) every
 * peer's certificate must chain to; {@code JCCL_TLS_TRUSTSTORE_PASSWORD}, default the keystore's).
 *
 * <p>Mutual TLS 1.3: both ends present a certificate and both verify the other's against the trust
 * store; host names are not checked (ranks are addressed by IP; being signed by the job's CA is the
 * identity). The job secret's HMAC handshake still runs inside TLS, so a TLS peer of another job is
 * refused as before. Null from {@link #fromConfig} means TLS is off and {@link #wrap} returns the
 * socket as it is.
 */
public final class Tls {

    private final SSLContext context;

    private Tls(SSLContext context) {
        this.context = context;
    }

    /**
     * The TLS setup {@code config} asks for, or null when {@code JCCL_TLS} is off.
     *
     * @throws ConfigException when a store is missing, unreadable or the password is wrong (naming the setting)
     */
    public static Tls fromConfig(Config config) {
        if (!Settings.TLS.getBool(config)) {
            return null;
        }
        String keystore = require(config, Settings.TLS_KEYSTORE);
        String truststore = require(config, Settings.TLS_TRUSTSTORE);
        String keyPassword = Settings.TLS_KEYSTORE_PASSWORD.getString(config);
        String trustPassword = Settings.TLS_TRUSTSTORE_PASSWORD.getString(config);
        char[] kp = keyPassword == null ? new char[0] : keyPassword.toCharArray();
        char[] tp = trustPassword == null ? kp : trustPassword.toCharArray();
        try {
            KeyStore ks = load(keystore, kp, Settings.TLS_KEYSTORE.name());
            KeyStore ts = load(truststore, tp, Settings.TLS_TRUSTSTORE.name());
            KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
            kmf.init(ks, kp);
            TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(ts);
            SSLContext ctx = SSLContext.getInstance("TLSv1.3");
            ctx.init(kmf.getKeyManagers(), tmf.getTrustManagers(), null);
            return new Tls(ctx);
        } catch (GeneralSecurityException e) {
            throw new ConfigException("JCCL_TLS=1 but the key or trust store cannot be used: " + e.getMessage() + " (check "
                    + Settings.TLS_KEYSTORE.name() + ", " + Settings.TLS_KEYSTORE_PASSWORD.name() + " and "
                    + Settings.TLS_TRUSTSTORE.name() + ")", e);
        }
    }

    private static String require(Config config, org.jccl.internal.config.Setting s) {
        String v = s.getString(config);
        if (v == null || v.isBlank()) {
            throw new ConfigException("JCCL_TLS=1 needs " + s.name() + ": " + s.doc());
        }
        return v.trim();
    }

    private static KeyStore load(String path, char[] password, String setting) throws GeneralSecurityException {
        File f = new File(path);
        if (!f.isFile()) {
            throw new ConfigException(setting + "=" + path + ": no such file");
        }
        try {
            return KeyStore.getInstance(f, password);
        } catch (IOException e) {
            throw new ConfigException(setting + "=" + path + " cannot be read: " + e.getMessage()
                    + " (a PKCS12 or JKS store; is the password right?)", e);
        }
    }

    /** An engine for one connection; {@code client} for the side that connected. */
    private SSLEngine engine(boolean client) {
        SSLEngine e = context.createSSLEngine();
        e.setUseClientMode(client);
        SSLParameters p = e.getSSLParameters();
        p.setProtocols(new String[] {"TLSv1.3"});
        if (!client) {
            p.setNeedClientAuth(true);
        }
        e.setSSLParameters(p);
        return e;
    }

    /**
     * The channel jccl speaks over on {@code ch}: TLS when {@code tls} is not null, else the socket.
     *
     * @param client true on the side that connected
     * @param peer what the connector calls the peer in messages ("rank 3 (host pid) at 10.0.0.3:4711"); the
     *        accepting side always says "the connection from ADDRESS"
     */
    public static WireChannel wrap(Tls tls, SocketChannel ch, boolean client, String peer) {
        if (tls == null) {
            return WireChannel.plain(ch);
        }
        return new TlsChannel(ch, tls.engine(client), client ? peer : "the connection from " + Handshake.remote(ch));
    }
}
