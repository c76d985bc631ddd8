// mysql-binlog-connector-java decoding binlog files (BinaryLogFileReader): every event, rows with
// their values. Prints one JSON line: events, rows, errors, seconds (after JVM start).
import com.github.shyiko.mysql.binlog.BinaryLogFileReader;
import com.github.shyiko.mysql.binlog.event.DeleteRowsEventData;
import com.github.shyiko.mysql.binlog.event.Event;
import com.github.shyiko.mysql.binlog.event.EventData;
import com.github.shyiko.mysql.binlog.event.UpdateRowsEventData;
import com.github.shyiko.mysql.binlog.event.WriteRowsEventData;
import com.github.shyiko.mysql.binlog.event.deserialization.EventDeserializer;
import java.io.File;

public class BinlogFileBench {
    public static void main(String[] args) {
        long t0 = System.nanoTime();
        long events = 0, rows = 0;
        int errors = 0;
        for (String f : args) {
            EventDeserializer d = new EventDeserializer();
            try (BinaryLogFileReader r = new BinaryLogFileReader(new File(f), d)) {
                Event e;
                while ((e = r.readEvent()) != null) {
                    events++;
                    EventData data = e.getData();
                    if (data instanceof WriteRowsEventData) rows += ((WriteRowsEventData) data).getRows().size();
                    else if (data instanceof UpdateRowsEventData) rows += ((UpdateRowsEventData) data).getRows().size();
                    else if (data instanceof DeleteRowsEventData) rows += ((DeleteRowsEventData) data).getRows().size();
                }
            } catch (Exception ex) {
                errors++;
                System.err.println(f + ": " + ex);
            }
        }
        double s = (System.nanoTime() - t0) / 1e9;
        System.out.println("{\"events\": " + events + ", \"rows\": " + rows + ", \"errors\": " + errors
                + ", \"seconds\": " + s + "}");
    }
}
