package dev.binlake.delta;

import java.io.ByteArrayOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.util.Arrays;
import java.util.Iterator;

import io.delta.storage.HadoopFileSystemLogStore;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.s3a.RemoteFileChangedException;

/**
 * A Delta {@code LogStore} for S3 (through S3A) whose commit is a put-if-absent: version N's
 * {@code _delta_log/N.json} is written with S3A's conditional create (HADOOP-19256:
 * {@code fs.option.create.conditional.overwrite}, a {@code PUT} or multipart completion with
 * {@code If-None-Match: *}), so of two drivers committing version N at once exactly one succeeds.
 * The other gets {@link FileAlreadyExistsException}, which is what Delta's optimistic commit
 * expects: it reads the winner's commit, checks for conflicts and retries at N+1, or reports the
 * conflict. Why not Delta's {@code S3SingleDriverLogStore}: it checks for the file and then PUTs
 * it unconditionally, safe only while one JVM writes a table; two drivers both "commit" version
 * N and the later PUT replaces the earlier commit (silently lost). Why not
 * {@code S3DynamoDBLogStore}: it needs DynamoDB; S3 (since 2024), MinIO and moto honour the header.
 *
 * <p>A lost answer: when a conditional PUT reached S3 but its answer did not reach the client
 * (a dropped connection, a 5xx after the write), S3A retries it and the retry gets 412 against
 * this writer's own object. So on 412, and on any other failure of the write, the object at
 * {@code path} is read back: holding exactly the bytes this call wrote (every commit carries its
 * own {@code commitInfo} timestamp and txn id, so no other writer writes the same bytes), the
 * write succeeded; holding other bytes, another writer won ({@link FileAlreadyExistsException});
 * absent, the original error is thrown (nothing was committed).
 *
 * <p>Overwrites ({@code overwrite=true}: {@code _last_checkpoint}) are plain PUTs, as in every
 * Delta LogStore. Reads and listings are {@link HadoopFileSystemLogStore}'s (S3 lists
 * consistently since 2020).
 */
public class S3ConditionalPutLogStore extends HadoopFileSystemLogStore {

    /** S3A's create option for a put-if-absent (hadoop-aws 3.4.2+). */
    public static final String CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite";
    /** Skip S3A's HEAD / LIST probes before a create: the condition is enforced by S3 itself. */
    static final String CREATE_PERFORMANCE = "fs.s3a.create.performance";
    /** S3A's switch for conditional writes (default true); false makes every commit here fail. */
    static final String CONDITIONAL_ENABLED = "fs.s3a.create.conditional.enabled";
    /** Reads of the object after a failed write, to learn whose it is. */
    static final int READ_BACK_ATTEMPTS = 3;

    public S3ConditionalPutLogStore(Configuration initHadoopConf) {
        super(initHadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        byte[] body = encode(actions);
        if (overwrite) {
            try (FSDataOutputStream out = fs.create(path, true)) {
                out.write(body);
            }
            return;
        }
        if (!fs.hasPathCapability(path, CONDITIONAL_CREATE)) {
            throw new IOException(path + ": the file system (" + fs.getScheme() + ", " + fs.getClass().getName()
                    + ") offers no conditional create (" + CONDITIONAL_CREATE + "; for S3A: hadoop-aws 3.4.2+ and "
                    + CONDITIONAL_ENABLED + "=true), so a Delta commit here cannot be a put-if-absent");
        }
        try {
            putIfAbsent(fs, path, body);
        } catch (IOException e) {
            Boolean mine = heldBy(fs, path, body);
            if (Boolean.TRUE.equals(mine)) {
                return;  // an earlier attempt of this very write landed; only its answer was lost
            }
            if (Boolean.FALSE.equals(mine) || alreadyExists(e)) {
                FileAlreadyExistsException exists = new FileAlreadyExistsException(path.toString(), null,
                        "another writer committed this version first (S3 refused If-None-Match: *)");
                exists.initCause(e);
                throw exists;
            }
            throw e;
        }
    }

    /** S3 objects appear whole or not at all. */
    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return false;
    }

    /** One create with S3A's conditional option; the object is published (and the condition checked) at close. */
    static void putIfAbsent(FileSystem fs, Path path, byte[] body) throws IOException {
        FSDataOutputStreamBuilder<?, ?> builder = fs.createFile(path);
        builder.create().overwrite(false).recursive();
        builder.must(CONDITIONAL_CREATE, true);
        builder.opt(CREATE_PERFORMANCE, true);
        FSDataOutputStream out = builder.build();
        try {
            out.write(body);
        } catch (IOException e) {
            out.abort();  // never publish a part of a commit
            throw e;
        }
        out.close();
    }

    /** Delta's commit file format: each action then a newline, UTF-8 (as Delta's own LogStores write it). */
    static byte[] encode(Iterator<String> actions) throws IOException {
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        while (actions.hasNext()) {
            buffer.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
        }
        return buffer.toByteArray();
    }

    /** Whether {@code path} holds exactly {@code body} (true), other bytes (false), or nothing readable (null). */
    static Boolean heldBy(FileSystem fs, Path path, byte[] body) {
        for (int attempt = 0; attempt < READ_BACK_ATTEMPTS; attempt++) {
            try (InputStream in = fs.open(path)) {
                return Arrays.equals(in.readAllBytes(), body);
            } catch (FileNotFoundException e) {
                return null;
            } catch (IOException | RuntimeException e) {
                // S3A retried already; one more round before giving up on knowing
            }
        }
        return null;
    }

    /** A 412 from S3 (S3A: {@link RemoteFileChangedException}) or a file system's "already exists", anywhere in the chain. */
    static boolean alreadyExists(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof RemoteFileChangedException || t instanceof FileAlreadyExistsException
                    || t instanceof org.apache.hadoop.fs.FileAlreadyExistsException) {
                return true;
            }
        }
        return false;
    }
}
